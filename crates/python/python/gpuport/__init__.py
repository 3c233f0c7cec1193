"""gpuport: one hardware-abstraction layer for GPUs, from Python.

Arrays on the host, CUDA, ROCm and plugin devices, exchanged with NumPy, PyTorch, CuPy,
JAX, Numba and cuda.core through DLPack and the CUDA Array Interface; collectives across
processes in `gpuport.distributed`. Everything is in the native module `gpuport.gpuport`,
re-exported here.
"""

from . import gpuport as _native
from .gpuport import *  # noqa: F403
from . import distributed

__all__ = [*_native.__all__, "distributed"]
