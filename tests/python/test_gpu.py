"""The GPU peers: CuPy, PyTorch (including its C exchange API), Numba and cuda.core, both
directions, DLPack and the CUDA Array Interface, the stream handshake with a non-default
consumer stream, and CUDA → CPU copies. Skipped where no CUDA device is found (the GPU
bundle runs them on a CUDA machine: docs/validation.md)."""

import numpy as np
import pytest

import gpuport
from conftest import requires_cuda, versioned_of

pytestmark = requires_cuda

IS_COPIED = 1 << 1


def cuda_array(values, dtype="float32"):
    return gpuport.asarray(values, dtype=dtype).to("cuda:0")


def test_cuda_array_basics():
    g = cuda_array([[1.0, 2.0], [3.0, 4.0]])
    assert g.__dlpack_device__() == (2, 0)
    cai = g.__cuda_array_interface__
    assert cai["version"] == 3 and cai["data"][0] == g.data_ptr and cai["stream"] != 0
    with pytest.raises(ValueError):
        g.__dlpack__(stream=0)  # ambiguous on CUDA
    cap = g.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    assert versioned_of(cap).flags & IS_COPIED and versioned_of(cap).dl_tensor.device.device_type == 1
    assert np.from_dlpack(g, device="cpu").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert not hasattr(g, "__array_interface__")


def test_cupy_both_directions():
    cp = pytest.importorskip("cupy")
    g = cuda_array([1.0, 2.0, 3.0])
    c = cp.from_dlpack(g)
    c[0] = 10.0
    assert g.tolist() == [10.0, 2.0, 3.0]
    via_cai = cp.asarray(g)  # __cuda_array_interface__
    assert int(via_cai.data.ptr) == g.data_ptr
    strided = cp.arange(6, dtype=cp.int32)[::2]
    back = gpuport.from_dlpack(strided)
    assert back.data_ptr == int(strided.data.ptr) and back.tolist() == [0, 2, 4]
    # Negative strides: CuPy's CUDA Array Interface gives them right (signed bytes) ...
    src = cp.arange(6, dtype=cp.int32).reshape(2, 3)[:, ::-1]

    class ViaCai:
        __cuda_array_interface__ = src.__cuda_array_interface__

    via_cai = gpuport.as_array(ViaCai())
    assert via_cai.data_ptr == int(src.data.ptr) and via_cai.tolist() == src.get().tolist()
    # ... while CuPy 14's DLPack export writes a negative stride as its unsigned byte value
    # divided by the item size (2**62 - 1 for -4 bytes): refused, naming the stride, rather
    # than read as an address range gpuport was never given.
    try:
        reversed_cols = gpuport.from_dlpack(src)
    except BufferError as e:
        assert "4611686018427387903 elements apart" in str(e)
    else:  # a CuPy whose export is right
        assert reversed_cols.tolist() == src.get().tolist()


def test_torch_both_directions_and_its_exchange_api():
    torch = pytest.importorskip("torch")
    g = cuda_array([[1, 2], [3, 4]], dtype="int64")
    t = torch.from_dlpack(g)
    assert t.device.type == "cuda" and t.tolist() == [[1, 2], [3, 4]]
    x = torch.arange(8, device="cuda", dtype=torch.float32).reshape(2, 4)[:, 1::2]
    before = dict(gpuport.exchange_counters())
    h = gpuport.from_dlpack(x)
    after = dict(gpuport.exchange_counters())
    has_table = hasattr(type(x), "__dlpack_c_exchange_api__") or hasattr(type(x), "__c_dlpack_exchange_api__")
    path = "consumer_exchange_api" if has_table else "consumer_dunder"
    assert after[path] == before[path] + 1
    assert h.tolist() == x.tolist() and h.data_ptr == x.data_ptr()
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 10):
        assert has_table, "torch >= 2.10 publishes the DLPack C exchange API"


def test_stream_handshake_waits_for_the_producer():
    torch = pytest.importorskip("torch")
    producer = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    with torch.cuda.stream(producer):
        torch.cuda._sleep(200_000_000)  # a long kernel on the producer's stream
        x.fill_(7.0)
        g = gpuport.from_dlpack(x)  # gpuport's stream must wait for it, without a host block
    assert float(np.from_dlpack(g, device="cpu")[-1]) == 7.0


def test_consumer_stream_waits_for_gpuport_pending_work():
    cp = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    producer = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    with torch.cuda.stream(producer):
        torch.cuda._sleep(200_000_000)
        x.fill_(3.0)
        g = gpuport.from_dlpack(x)
    consumer = cp.cuda.Stream(non_blocking=True)
    with consumer:
        c = cp.from_dlpack(g)  # passes consumer.ptr: gpuport makes it wait
        total = float(c.sum())
    assert total == 3.0 * (1 << 20)


def test_numba_cai_both_directions():
    numba_cuda = pytest.importorskip("numba.cuda")
    g = cuda_array([1.0, 2.0, 3.0, 4.0])
    d = numba_cuda.as_cuda_array(g)
    assert d.copy_to_host().tolist() == [1.0, 2.0, 3.0, 4.0]
    dev = numba_cuda.to_device(np.arange(5, dtype=np.float64))
    h = gpuport.as_array(dev)
    assert h.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_cuda_core_views():
    try:
        from cuda.core import Device
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        Device = pytest.importorskip("cuda.core.experimental").Device
        StridedMemoryView = pytest.importorskip("cuda.core.experimental.utils").StridedMemoryView
    g = cuda_array([[1.0, 2.0, 3.0]])
    # Newer cuda.core names the protocol (`from_dlpack`, `from_cuda_array_interface`) and
    # deprecates the constructor, which tries DLPack first; older versions have only the
    # constructor, so there the CUDA Array Interface cannot be asked for on its own.
    if hasattr(StridedMemoryView, "from_dlpack"):
        view = StridedMemoryView.from_dlpack(g, stream_ptr=-1)
    else:
        view = StridedMemoryView(g, stream_ptr=-1)
    assert view.ptr == g.data_ptr and tuple(view.shape) == (1, 3) and view.device_id == 0
    if hasattr(StridedMemoryView, "from_cuda_array_interface"):
        # A consumer stream of cuda.core's own: it orders itself after the `stream` the
        # interface names (an event recorded there, waited for here), so that stream must
        # be a live CUstream of the array's device.
        device = Device(0)
        device.set_current()
        consumer = device.create_stream()
        view = StridedMemoryView.from_cuda_array_interface(g, stream_ptr=int(consumer.handle))
        consumer.sync()
        assert view.ptr == g.data_ptr and tuple(view.shape) == (1, 3) and view.device_id == 0
        consumer.close()


def test_mirrored_array_with_cupy_device_side():
    cp = pytest.importorskip("cupy")
    m = gpuport.MirroredArray.zeros((2, 2), "float32", device="cuda:0")
    np.asarray(m)[:] = 5.0
    m.set_host_modified()
    c = cp.asarray(m)  # __cuda_array_interface__ refreshes the device side
    assert float(c.sum()) == 20.0 and m.sync_state.state == gpuport.SYNC_CLEAN
    c[:] = 1.0
    cp.cuda.runtime.deviceSynchronize()
    m.set_device_modified()
    assert np.asarray(m).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_nccl_collectives_on_cupy_and_torch_arrays():
    from gpuport import distributed

    nccl = next(e for e in distributed.engines() if e.name == "NCCL")
    if not nccl.available:
        pytest.skip(f"no NCCL: {nccl.reason}")
    (comm,) = distributed.init_all(["cuda:0"])
    g = cuda_array([1.0, -2.0, 3.5])
    assert comm.all_reduce(g, op="sum") is g and g.tolist() == [1.0, -2.0, 3.5]
    cp = pytest.importorskip("cupy")
    c = cp.arange(6, dtype=cp.float32)
    assert comm.all_reduce(c, op="max") is c  # imported through DLPack, reduced in place
    assert c.get().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    gathered = comm.all_gather(c[:2])
    assert gathered.shape == (1, 2) and gathered.tolist() == [[0.0, 1.0]]
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.int64, device="cuda:0")
    assert comm.broadcast(t, root=0) is t and t.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="backend mismatch in all_reduce"):
        comm.all_reduce(torch.zeros(2))  # a CPU tensor: not the rank's device
