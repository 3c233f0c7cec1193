"""Every rank adds its array into everyone's: `mpiexec -n 4 python allreduce.py`. Each rank
checks the sum against what it knows every rank contributed and prints one line.

The array is on the first GPU gpuport finds, else on the host; MPI comes from the `mpich`
wheel (`pip install mpich`) or the library GPUPORT_MPI_LIBRARY names."""

import sys

import numpy as np

import gpuport
from gpuport import distributed


def main() -> int:
    world = distributed.init()
    rank, size = world.rank, world.size
    gpus = [d for d in gpuport.devices() if d.kind in ("cuda", "rocm")]
    device = gpus[0] if gpus else gpuport.device("host")
    # Rank r contributes r + 1 in every element: the sum is size × (size + 1) / 2.
    n = 1 << 20
    x = gpuport.full(n, rank + 1, dtype=np.float32, device=device)
    world.all_reduce(x, op="sum")
    want = size * (size + 1) / 2
    got = np.from_dlpack(x.to("host"))
    if not (got == want).all():
        print(f"rank {rank}: expected {want} everywhere", file=sys.stderr)
        return 1
    print(f"rank {rank} of {size}: all_reduce of {n} float32 on {device} verified "
          f"(every element {want:g}) — {world.engine_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
