"""gpuport's own Python API on CUDA and ROCm arrays: CUDA Array Interface dicts of device
arrays, `from_dlpack` device and copy requests, and `MirroredArray` with a device side.
Run for the backend named in GPUPORT_CONFORMANCE_BACKENDS (`cargo xtask test --backend
cuda|rocm --double` sets it, with the driver double loaded), which must then be
available; skipped otherwise."""

import os

import numpy as np
import pytest

import gpuport

BACKEND = os.environ.get("GPUPORT_CONFORMANCE_BACKENDS", "")
pytestmark = pytest.mark.skipif(
    BACKEND not in ("cuda", "rocm"), reason="GPUPORT_CONFORMANCE_BACKENDS names no vendor backend"
)
DL_DEVICE = {"cuda": 2, "rocm": 10}.get(BACKEND)
IS_COPIED = 1 << 1


@pytest.fixture(scope="module", autouse=True)
def backend_is_available():
    found = [b for b in gpuport.backends() if b.name == BACKEND]
    assert found and found[0].available, f"{BACKEND} must be available: {found[0].reason if found else 'unknown'}"


def on_device(values, dtype="float32", index=0):
    return gpuport.asarray(values, dtype=dtype).to(f"{BACKEND}:{index}")


def test_cuda_array_interface_of_device_arrays():
    g = on_device([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    cai = g.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (2, 3) and cai["typestr"] == "<f4"
    assert cai["data"] == (g.data_ptr, False) and cai.get("strides") is None
    t = g[:, ::2].__cuda_array_interface__
    assert t["strides"] == (12, 8) and t["shape"] == (2, 2)

    class Producer:
        __cuda_array_interface__ = cai

    back = gpuport.as_array(Producer())
    assert back.data_ptr == g.data_ptr and back.device == g.device
    assert back.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert not hasattr(g, "__array_interface__"), "device memory is not host memory"


def last_device_index():
    """The backend's last device: device 1 where there are two (the doubles), so a
    non-zero `device_id` is checked; device 0 on a one-GPU machine."""
    (backend,) = [b for b in gpuport.backends() if b.name == BACKEND]
    return len(backend.devices) - 1


def test_dlpack_device_and_copy_requests():
    index = last_device_index()
    g = on_device(list(range(10)), dtype="int32", index=index)
    assert g.__dlpack_device__() == (DL_DEVICE, index)
    same = gpuport.from_dlpack(g)
    assert same.data_ptr == g.data_ptr and same.device == g.device
    on_host = gpuport.from_dlpack(g, device="host")
    assert on_host.device == gpuport.device("host") and on_host.tolist() == list(range(10))
    with pytest.raises(BufferError):
        gpuport.from_dlpack(g, device="host", copy=False)
    copied = gpuport.from_dlpack(g, copy=True)
    assert copied.data_ptr != g.data_ptr and copied.tolist() == list(range(10))
    assert np.from_dlpack(g, device="cpu").tolist() == list(range(10))
    other = gpuport.from_dlpack(g, device=f"{BACKEND}:0")
    assert other.device == gpuport.device(f"{BACKEND}:0") and other.tolist() == list(range(10))
    with pytest.raises(ValueError):
        g.__dlpack__(stream=0 if BACKEND == "cuda" else 1)  # not a stream on that vendor


def test_mirrored_array_with_a_device_side():
    m = gpuport.MirroredArray.zeros((2, 2), "float32", device=f"{BACKEND}:0")
    np.asarray(m)[:] = 5.0
    m.set_host_modified()
    d = m.device_array()
    assert d.device == gpuport.device(f"{BACKEND}:0") and d.tolist() == [[5.0, 5.0], [5.0, 5.0]]
    assert m.sync_state.state == gpuport.SYNC_CLEAN
    d[...] = gpuport.asarray([[1.0, 2.0], [3.0, 4.0]], dtype="float32")
    m.set_device_modified()
    assert np.asarray(m).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    cai = m.__cuda_array_interface__
    assert cai["data"][0] == d.data_ptr


@pytest.mark.parametrize("shape,at,strides", [((4096,), 0, None), ((1 << 28,), 0, None), ((17,), 0, None),
                                              ((16,), 8, None), ((4,), 7, (-8,))])
def test_imports_reaching_outside_their_allocation_are_refused(shape, at, strides):
    # CUDA reports an allocation's range with its pointer attributes, HIP through
    # hipMemGetAddressRange: a span past a 16-byte allocation never reaches the driver.
    g = on_device(list(range(16)), dtype="uint8")
    desc = {"shape": shape, "typestr": "|u1", "data": (g.data_ptr + at, False), "version": 3, "strides": strides}
    with pytest.raises(ValueError, match="outside their allocation"):
        gpuport.from_cuda_array_interface(desc, owner=g)
    inside = gpuport.from_cuda_array_interface(
        {"shape": (8,), "typestr": "|u1", "data": (g.data_ptr + 8, False), "version": 3}, owner=g)
    assert inside.tolist() == list(range(8, 16))
