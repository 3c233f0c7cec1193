"""Type stubs for `gpuport.distributed`: collectives across processes."""

from collections.abc import Iterable
from types import TracebackType
from typing import Any, Literal, final

from . import Array, Device, Event, Stream

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

ReduceOpName = Literal["sum", "prod", "min", "max", "avg"]

@final
class Engine:
    @property
    def name(self) -> str: ...
    @property
    def available(self) -> bool: ...
    @property
    def version(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def lacks(self) -> list[str]: ...

@final
class Work:
    def wait(self) -> Any:
        """Waits until the collective is done; returns its result (None where this rank has none)."""
    def is_done(self) -> bool: ...
    @property
    def event(self) -> Event: ...

@final
class Communicator:
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def engine(self) -> str: ...
    @property
    def engine_version(self) -> str: ...
    def dup(self) -> Communicator: ...
    def split(self, color: int | None, key: int = 0) -> Communicator | None: ...
    def for_device(self, device: Device | str | tuple[int, int]) -> Communicator:
        """This MPI communicator's ranks on NCCL (CUDA) or RCCL (ROCm), each on the device it passes."""
    def barrier(self) -> None: ...
    def all_reduce(
        self, x: Any, op: ReduceOpName = "sum", out: Any | None = None, stream: Stream | None = None, *, async_op: bool = False
    ) -> Any: ...
    def broadcast(self, x: Any, root: int = 0, stream: Stream | None = None, *, async_op: bool = False) -> Any: ...
    def reduce(
        self,
        x: Any,
        root: int = 0,
        op: ReduceOpName = "sum",
        out: Any | None = None,
        stream: Stream | None = None,
        *,
        async_op: bool = False,
    ) -> Any: ...
    def all_gather(self, x: Any, out: Any | None = None, stream: Stream | None = None, *, async_op: bool = False) -> Any: ...
    def reduce_scatter(
        self, x: Any, op: ReduceOpName = "sum", out: Any | None = None, stream: Stream | None = None, *, async_op: bool = False
    ) -> Any: ...
    def all_to_all(self, x: Any, out: Any | None = None, stream: Stream | None = None, *, async_op: bool = False) -> Any: ...
    def send(self, x: Any, dst: int, tag: int = 0, stream: Stream | None = None, *, async_op: bool = False) -> Any: ...
    def recv(self, x: Any, src: int, tag: int = 0, stream: Stream | None = None, *, async_op: bool = False) -> Any: ...

def engines() -> list[Engine]:
    """Every collectives engine gpuport knows, with its version or why it is unavailable."""

def init(engine: Literal["mpi"] | None = None) -> Communicator:
    """The world communicator (every rank of the job), its engine started."""

def init_all(devices: Iterable[Device | str | tuple[int, int]]) -> list[Communicator]:
    """One NCCL (CUDA) or RCCL (ROCm) communicator over this process's devices, a rank each."""

def split_all(
    comms: Iterable[Communicator], colors: Iterable[int | None], keys: Iterable[int] | None = None
) -> list[Communicator | None]:
    """Several NCCL/RCCL ranks this thread drives split together: each rank's new communicator, or None."""

def unique_id(device: Device | str | tuple[int, int]) -> bytes:
    """A new NCCL (CUDA) or RCCL (ROCm) unique id: the 128 bytes every rank of a new communicator is given."""

def init_rank(device: Device | str | tuple[int, int], unique_id: bytes, size: int, rank: int) -> Communicator:
    """Rank `rank` of `size` on `device`, once every rank has joined with the same id (or raises after the timeout)."""

@final
class Group:
    def __enter__(self) -> Group: ...
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool: ...

def group() -> Group:
    """`with group():` issues the block's collectives together (async_op=True), started when it ends."""
