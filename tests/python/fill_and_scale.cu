// gpuport's test kernels compiled from source: one source for NVRTC and hiprtc. The
// driver doubles run `fill_u32` by name; `scale<float>` is looked up by its name
// expression. Used by backends/test-support/compile_cases.rs and test_raw_kernels.py.
#include <gpuport/kernel.h>

GPUPORT_KERNEL void fill_u32(gpuport::u32* p, gpuport::u32 n, gpuport::u32 value) {
    gpuport::u64 i = gpuport::global_index_x();
    if (i < n) p[i] = value;
}

template <typename T>
GPUPORT_TEMPLATE_KERNEL void scale(T* p, gpuport::u32 n, T by) {
    for (gpuport::u64 i = gpuport::global_index_x(); i < n; i += gpuport::global_stride_x()) p[i] *= by;
}
