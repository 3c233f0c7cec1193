// fill_u32(ptr, n, value): ptr[i] = value for i < n. Built without device libraries:
// the work-item index comes from clang builtins and the dispatch packet.
__kernel void fill_u32(__global uint* ptr, uint n, uint value) {
    __constant ushort* dispatch = (__constant ushort*)__builtin_amdgcn_dispatch_ptr();
    uint block = dispatch[2]; /* hsa_kernel_dispatch_packet_t.workgroup_size_x */
    uint i = __builtin_amdgcn_workgroup_id_x() * block + __builtin_amdgcn_workitem_id_x();
    if (i < n) ptr[i] = value;
}
