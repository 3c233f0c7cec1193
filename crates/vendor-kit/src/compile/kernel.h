// <gpuport/kernel.h>: what differs between NVRTC (CUDA) and hiprtc (ROCm) for one kernel
// source. Given to both compilers as an in-memory header; include it first.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIP_DEVICE_COMPILE__) || defined(__HIP__)
#define GPUPORT_HIP 1
#define GPUPORT_CUDA 0
#else
#define GPUPORT_HIP 0
#define GPUPORT_CUDA 1
#endif

// A kernel gpuport can find by its plain name.
#define GPUPORT_KERNEL extern "C" __global__
// The same, for templates (found by their name expression, `scale<float>`).
#define GPUPORT_TEMPLATE_KERNEL __global__

// Fixed-width integers: hiprtc 7 no longer provides `int64_t` and friends by default, and
// NVRTC provides them only with its own headers. These names are the same everywhere.
namespace gpuport {
typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Index helpers over one dimension, and the grid-stride loop's step.
__device__ inline u64 global_index_x() {
    return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;
}
__device__ inline u64 global_stride_x() {
    return (u64)gridDim.x * (u64)blockDim.x;
}

// The warp (CUDA) or wavefront (AMD: 64, or 32 on RDNA) size of the device.
__device__ inline int warp_size() {
    return warpSize;
}

// Shuffles over the whole warp. CUDA 9 and later require the `_sync` forms; HIP before 6.2
// has only the plain ones, which act on the whole wavefront.
#if GPUPORT_HIP
template <typename T> __device__ inline T shfl_down(T v, unsigned delta) { return __shfl_down(v, delta); }
template <typename T> __device__ inline T shfl_xor(T v, int mask) { return __shfl_xor(v, mask); }
template <typename T> __device__ inline T shfl(T v, int lane) { return __shfl(v, lane); }
#else
template <typename T> __device__ inline T shfl_down(T v, unsigned delta) { return __shfl_down_sync(0xffffffffu, v, delta); }
template <typename T> __device__ inline T shfl_xor(T v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
template <typename T> __device__ inline T shfl(T v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }
#endif

// Atomics both vendors spell the same way.
template <typename T> __device__ inline T atomic_add(T* p, T v) { return atomicAdd(p, v); }
template <typename T> __device__ inline T atomic_max(T* p, T v) { return atomicMax(p, v); }
template <typename T> __device__ inline T atomic_min(T* p, T v) { return atomicMin(p, v); }
template <typename T> __device__ inline T atomic_cas(T* p, T expected, T desired) { return atomicCAS(p, expected, desired); }
}  // namespace gpuport
