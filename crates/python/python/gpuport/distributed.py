"""Collectives across processes and machines: `init()` returns the world `Communicator`
(every rank of the job, under `mpiexec -n N python script.py`), whose `all_reduce`,
`broadcast`, `reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send`/`recv` and
`barrier` take gpuport arrays or any DLPack array (a writable NumPy array is reduced in
place). `engines()` lists the collectives engines with their versions, or why each is
unavailable. Implemented in the native module; docs/collectives.md says how to launch.
"""

from .gpuport import _distributed as _native

Communicator = _native.Communicator
Engine = _native.Engine
Work = _native.Work
engines = _native.engines
init = _native.init

__all__ = ["Communicator", "Engine", "Work", "engines", "init"]
