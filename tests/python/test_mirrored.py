"""gpuport.MirroredArray (software-managed host/device storage): NumPy on the host side, the ext
device on the device side (CuPy where a GPU is: test_gpu.py)."""

import numpy as np
import pytest

import gpuport

CLEAN, HOST_DIRTY, DEVICE_DIRTY = gpuport.SYNC_CLEAN, gpuport.SYNC_HOST_DIRTY, gpuport.SYNC_DEVICE_DIRTY


def test_constants():
    assert (CLEAN, HOST_DIRTY, DEVICE_DIRTY) == (0, 1, 2)
    assert gpuport.SyncState.SYNC_DEVICE_DIRTY == DEVICE_DIRTY
    s = gpuport.SyncState()
    assert s.state == CLEAN
    s.state = HOST_DIRTY
    assert s.state == HOST_DIRTY
    with pytest.raises(ValueError):
        s.state = 7


def test_host_writes_reach_the_device_only_when_marked():
    m = gpuport.MirroredArray.zeros((2, 3), "float32", device="ext:0")
    assert m.sync_state.state == CLEAN and m.device == gpuport.device("ext:0") and m.shape == (2, 3)
    h = np.asarray(m)
    h[:] = np.arange(6).reshape(2, 3)
    assert m.device_array().tolist() == [[0.0] * 3] * 2  # unmarked: not copied
    m.set_host_modified()
    assert m.sync_state.state == HOST_DIRTY
    assert m.device_array().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert m.sync_state.state == CLEAN and m.copy_counts == (1, 0)
    m.device_array()
    assert m.copy_counts == (1, 0)  # clean: no copy


def test_device_writes_reach_the_host_interfaces():
    m = gpuport.MirroredArray.zeros(4, "int32", device="ext:1")
    d = m.device_array()
    d[...] = gpuport.asarray([1, 2, 3, 4], dtype="int32")
    m.set_device_modified()
    assert np.asarray(m).tolist() == [1, 2, 3, 4]  # __array_interface__ refreshed the host
    assert m.sync_state.state == CLEAN and m.copy_counts == (0, 1)
    d[1:3] = 0
    m.set_device_modified()
    assert gpuport.from_dlpack(m.__dlpack__(dl_device=(1, 0), max_version=(1, 3))).tolist() == [1, 0, 0, 4]


def test_views_share_the_state_object():
    m = gpuport.MirroredArray.zeros((4, 4), "float64", device="ext:0")
    v = m[1:, ::2]
    t = m.transpose()
    assert v.shape == (3, 2) and t.shape == (4, 4) and m[2].shape == (4,)
    assert v.sync_state is m.sync_state and t.sync_state is m.sync_state
    v.set_device_modified()
    assert m.sync_state.state == DEVICE_DIRTY
    m.set_synchronized()
    assert v.sync_state.state == CLEAN
    np.asarray(m)[:] = 1.0
    v.set_host_modified()
    assert v.device_array().to("host").tolist() == [[1.0, 1.0]] * 3
    assert m.copy_counts == (1, 0)  # the whole base buffers moved once


def test_wrapping_existing_buffers_without_copying():
    host = np.arange(6, dtype=np.float32)
    m = gpuport.MirroredArray(data=host, device="ext:0")
    assert m.sync_state.state == HOST_DIRTY
    assert np.shares_memory(np.asarray(m), host)
    assert m.device_array().to("host").tolist() == host.tolist()
    dev = gpuport.asarray([9, 8, 7], dtype="int16").to("ext:1")
    n = gpuport.MirroredArray(device_data=dev)
    assert n.sync_state.state == DEVICE_DIRTY and n.device == gpuport.device("ext:1")
    assert n.device_array().data_ptr == dev.data_ptr
    assert np.asarray(n).tolist() == [9, 8, 7]


def test_buffers_taken_out_and_wrapped_again_share_the_state():
    m = gpuport.MirroredArray.zeros(3, "float32", device="ext:0")
    host, dev = np.asarray(m), m.device_array()
    again = gpuport.MirroredArray(data=host, device_data=dev, sync_state=m.sync_state)
    assert again.sync_state is m.sync_state
    again.set_device_modified()
    assert m.sync_state.state == DEVICE_DIRTY
    dev[...] = gpuport.asarray([1.0, 2.0, 3.0], dtype="float32")
    assert np.asarray(m).tolist() == [1.0, 2.0, 3.0] and again.sync_state.state == CLEAN


def test_force_and_synchronize():
    m = gpuport.MirroredArray.zeros(2, device="ext:0")
    m.host_to_device(force=True)
    m.device_to_host(force=True)
    assert m.copy_counts == (1, 1)
    m.synchronize()
    assert m.copy_counts == (1, 1)
    m.set_host_modified()
    m.synchronize()
    assert m.copy_counts == (2, 1) and m.sync_state.state == CLEAN


def test_interfaces_and_errors():
    m = gpuport.MirroredArray.zeros(2, device="ext:0")
    assert m.__dlpack_device__() == (12, 0)
    m.set_host_modified()
    assert m.__dlpack_device__() == (1, 0)  # the host holds the newer data
    assert not hasattr(m, "__cuda_array_interface__")  # ext is not CUDA/ROCm
    with pytest.raises(TypeError):
        gpuport.MirroredArray()
    with pytest.raises(TypeError):
        gpuport.MirroredArray(data=object())
    with pytest.raises(ValueError):
        gpuport.MirroredArray(data=np.zeros(3), device_data=gpuport.zeros(4, dtype="float64", device="ext:0"))


def test_without_device_the_mirror_says_where_its_device_side_is():
    if any(b.available for b in gpuport.backends() if b.name in ("cuda", "rocm")):
        pytest.skip("a GPU is available: the device side goes there, without a warning")
    with pytest.warns(UserWarning, match="device side is host memory too"):
        m = gpuport.MirroredArray(data=np.arange(4.0))
    assert "device='host:0'" in repr(m)
    with pytest.warns(UserWarning, match="pass device="):
        gpuport.MirroredArray.zeros((2,))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpuport.MirroredArray(data=np.arange(4.0), device="ext:0")  # chosen: no warning
