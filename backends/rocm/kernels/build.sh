#!/usr/bin/env bash
# Rebuilds the embedded fill_u32 code objects, one per GPU architecture, from fill_u32.cl.
# The .co files are committed: building gpuport needs no ROCm and no clang.
#
# - gfx900/906/908/90a/1030 (GCN 5, CDNA 1-2, RDNA 2): Debian's clang-14 (code object v4,
#   which ROCm 5.x loads): apt-get install clang-14 lld-14.
# - gfx940/941/942 (CDNA 3, MI300) need LLVM 17+, gfx110x (RDNA 3) LLVM 15+, gfx115x (RDNA
#   3.5) and gfx120x (RDNA 4) LLVM 18+: Debian's clang-19 (code object v5; the ROCm
#   releases that support these chips, 6.0 and later, load it):
#   apt-get install clang-19 lld-19.
# Not covered (document, or add here with a newer clang): gfx950 (MI350, LLVM 20+) and any
# architecture newer than the clang used.
#
# Every kernel is built with clang's default `max_flat_workgroup_size` of 256: launches
# of fill_u32 must use at most 256 work-items per block (the conformance suite uses 128).
set -euo pipefail
cd "$(dirname "$0")"
build() {
  local clang=$1; shift
  for arch in "$@"; do
    "$clang" -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu="$arch" -nogpulib -O2 \
      fill_u32.cl -o "fill_u32-$arch.co"
  done
}
build clang-14 gfx900 gfx906 gfx908 gfx90a gfx1030
build clang-19 gfx940 gfx941 gfx942 gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1200 gfx1201
