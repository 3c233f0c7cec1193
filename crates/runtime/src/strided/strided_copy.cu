// gpuport's copy kernels: one launch copies every element of a strided view into another
// layout of the same shape on one device, where 2D copies of short rows would cost one
// DMA row per element. Compiled at first use (NVRTC on NVIDIA, hiprtc on AMD) from this
// one source and cached; the driver doubles run a CPU implementation by the same names.
//
// gpuport_strided_copy_<N>(src, dst, n, ndim, shape[8], src_strides[8], dst_strides[8]):
// elements of N bytes (1, 2, 4, 8, 16); `src` and `dst` point at element 0 of each side;
// `shape` lists the view's `ndim` (1–8) extents outermost first, the strides are in
// elements (negative allowed) and the unused trailing entries are ignored. Element `i` in
// C order goes from `src + Σ c_d·src_strides[d]` to `dst + Σ c_d·dst_strides[d]`, where
// `c` is `i`'s coordinate. Any launch geometry copies all `n` elements (a grid-stride loop).
#include <gpuport/kernel.h>

namespace gpuport_copy {

using gpuport::i64;
using gpuport::u32;
using gpuport::u64;

struct alignas(8) bytes16 {
    u64 lo, hi;
};

constexpr int MAX_RANK = 8;

// One element's offsets on both sides. `I` is the index type: 32-bit division is several
// times cheaper than 64-bit on both vendors, and views under 2^32 elements take it.
template <typename I>
__device__ inline void offsets(I i, u32 ndim, const u64* shape, const i64* ss, const i64* ds, i64& so, i64& dof) {
    so = 0;
    dof = 0;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 1; --d) {
        if (d < (int)ndim) {
            I extent = (I)shape[d];
            I c = i % extent;
            i /= extent;
            so += (i64)c * ss[d];
            dof += (i64)c * ds[d];
        }
    }
    so += (i64)i * ss[0];
    dof += (i64)i * ds[0];
}

template <typename T>
__device__ inline void strided_copy(const T* src, T* dst, u64 n, u32 ndim, const u64* shape, const i64* ss,
                                    const i64* ds) {
    i64 so, dof;
    if (n <= 0xffffffffull) {
        for (u64 i = gpuport::global_index_x(); i < n; i += gpuport::global_stride_x()) {
            offsets<u32>((u32)i, ndim, shape, ss, ds, so, dof);
            dst[dof] = src[so];
        }
    } else {
        for (u64 i = gpuport::global_index_x(); i < n; i += gpuport::global_stride_x()) {
            offsets<u64>(i, ndim, shape, ss, ds, so, dof);
            dst[dof] = src[so];
        }
    }
}

}  // namespace gpuport_copy

#define GPUPORT_STRIDED_COPY(N, T)                                                                                \
    GPUPORT_KERNEL void gpuport_strided_copy_##N(                                                                 \
        const T* src, T* dst, gpuport::u64 n, gpuport::u32 ndim, gpuport::u64 n0, gpuport::u64 n1, gpuport::u64 n2, \
        gpuport::u64 n3, gpuport::u64 n4, gpuport::u64 n5, gpuport::u64 n6, gpuport::u64 n7, gpuport::i64 s0,     \
        gpuport::i64 s1, gpuport::i64 s2, gpuport::i64 s3, gpuport::i64 s4, gpuport::i64 s5, gpuport::i64 s6,      \
        gpuport::i64 s7, gpuport::i64 d0, gpuport::i64 d1, gpuport::i64 d2, gpuport::i64 d3, gpuport::i64 d4,      \
        gpuport::i64 d5, gpuport::i64 d6, gpuport::i64 d7) {                                                       \
        const gpuport::u64 shape[8] = {n0, n1, n2, n3, n4, n5, n6, n7};                                           \
        const gpuport::i64 ss[8] = {s0, s1, s2, s3, s4, s5, s6, s7};                                              \
        const gpuport::i64 ds[8] = {d0, d1, d2, d3, d4, d5, d6, d7};                                              \
        gpuport_copy::strided_copy<T>(src, dst, n, ndim, shape, ss, ds);                                          \
    }

GPUPORT_STRIDED_COPY(1, gpuport::u8)
GPUPORT_STRIDED_COPY(2, gpuport::u16)
GPUPORT_STRIDED_COPY(4, gpuport::u32)
GPUPORT_STRIDED_COPY(8, gpuport::u64)
GPUPORT_STRIDED_COPY(16, gpuport_copy::bytes16)
