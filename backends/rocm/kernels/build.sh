#!/usr/bin/env bash
# Rebuilds the embedded fill_u32 code objects, one per GPU architecture, from fill_u32.cl.
# Needs Debian's clang-14 (its amdgcn target and lld): apt-get install clang-14 lld-14.
# The .co files are committed: building gpuport needs no ROCm and no clang.
set -euo pipefail
cd "$(dirname "$0")"
for arch in gfx900 gfx906 gfx908 gfx90a gfx1030; do
  clang-14 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu="$arch" -nogpulib -O2 \
    fill_u32.cl -o "fill_u32-$arch.co"
done
