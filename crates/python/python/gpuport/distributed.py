"""Collectives across processes and machines: `init()` returns the world `Communicator`
(every rank of the job, under `mpiexec -n N python script.py`), whose `all_reduce`,
`broadcast`, `reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send`/`recv` and
`barrier` take gpuport arrays or any DLPack array (a writable NumPy array is reduced in
place). `init_all(devices)` returns one NCCL (CUDA) or RCCL (ROCm) communicator per device
of this process, whose collectives one thread issues together inside `with group():`;
`init_rank(device, unique_id, size, rank)` one rank of one, made by each rank's thread or
process with the same `unique_id(device)` bytes, and `init().for_device(device)` the MPI
world's ranks on their GPUs.
`engines()` lists the collectives engines with their versions, or why each is
unavailable. Implemented in the native module; docs/collectives.md says how to launch.
"""

from .gpuport import _distributed as _native

Communicator = _native.Communicator
Engine = _native.Engine
Group = _native.Group
Work = _native.Work
engines = _native.engines
group = _native.group
init = _native.init
init_all = _native.init_all
init_rank = _native.init_rank
split_all = _native.split_all
unique_id = _native.unique_id

__all__ = [
    "Communicator",
    "Engine",
    "Group",
    "Work",
    "engines",
    "group",
    "init",
    "init_all",
    "init_rank",
    "split_all",
    "unique_id",
]
