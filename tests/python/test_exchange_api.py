"""The DLPack C exchange API, both sides: gpuport's table (called here through ctypes and
by apache-tvm-ffi) and gpuport's consumer of another producer's table (tvm-ffi's
DLTensorTestWrapper). Which path ran is checked through gpuport.exchange_counters()."""

import ctypes

import numpy as np
import pytest

import gpuport
from conftest import DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, collect

tvm_ffi = pytest.importorskip("tvm_ffi")

SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class Header(ctypes.Structure):
    pass


Header._fields_ = [("version", DLPackVersion), ("prev_api", ctypes.POINTER(Header))]


class ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", Header),
        ("managed_tensor_allocator", ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
            ctypes.c_void_p, SET_ERROR)),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))),
    ]


# Functions that take Python objects are called through PYFUNCTYPE (the GIL held, and a
# Python exception raised on -1 is read back).
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.POINTER(ctypes.py_object))
DLTENSOR_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))


def table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    addr = get(gpuport.Array.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    return addr, ctypes.cast(addr, ctypes.POINTER(ExchangeAPI)).contents


def counters():
    return dict(gpuport.exchange_counters())


def delta(before, after):
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def test_table_is_published_under_both_names_with_all_functions():
    addr, api = table()
    assert gpuport.Array.__c_dlpack_exchange_api__ == addr
    assert (api.header.version.major, api.header.version.minor) == (1, 3) and not api.header.prev_api
    for name, _ in ExchangeAPI._fields_[1:]:
        assert getattr(api, name), f"{name} is NULL"
    _, again = table()
    assert ctypes.addressof(again) == addr  # one process-lifetime table


def test_table_functions_called_directly():
    _, api = table()
    a = gpuport.asarray([[1.0, 2.0, 3.0]])[:, ::-1]
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert FROM_PY(api.managed_tensor_from_py_object_no_sync)(a, ctypes.byref(out)) == 0
    m = out.contents
    assert (m.version.major, m.flags, m.dl_tensor.ndim, m.dl_tensor.strides[1]) == (1, 0, 2, -1)
    obj = ctypes.py_object()
    assert TO_PY(api.managed_tensor_to_py_object_no_sync)(out, ctypes.byref(obj)) == 0
    back = obj.value
    assert isinstance(back, gpuport.Array) and back.tolist() == [[3.0, 2.0, 1.0]] and back.data_ptr == a.data_ptr
    t = DLTensor()
    assert DLTENSOR_FROM_PY(api.dltensor_from_py_object_no_sync)(a, ctypes.byref(t)) == 0
    assert (t.ndim, t.shape[0], t.shape[1], t.strides[1], t.data) == (2, 1, 3, -1, a.data_ptr)
    with pytest.raises(TypeError):
        FROM_PY(api.managed_tensor_from_py_object_no_sync)(np.zeros(2), ctypes.byref(out))
    stream = ctypes.c_void_p(123)
    assert api.current_work_stream(1, 0, ctypes.byref(stream)) == 0 and not stream.value


def test_allocator_makes_a_tensor_like_the_prototype_and_reports_errors():
    _, api = table()
    shape = (ctypes.c_int64 * 2)(2, 3)
    proto = DLTensor(data=None, device=DLDevice(12, 1), ndim=2, dtype=DLDataType(2, 64, 1),
                     shape=shape, strides=None, byte_offset=0)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = []
    set_error = SET_ERROR(lambda ctx, kind, msg: errors.append((kind.decode(), msg.decode())))
    assert api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == 0
    t = out.contents.dl_tensor
    assert (t.device.device_type, t.device.device_id, t.ndim, t.shape[1], t.strides[0]) == (12, 1, 2, 3, 3)
    obj = ctypes.py_object()
    assert TO_PY(api.managed_tensor_to_py_object_no_sync)(out, ctypes.byref(obj)) == 0
    assert obj.value.device == gpuport.device("ext:1") and obj.value.shape == (2, 3)
    proto.device = DLDevice(7, 0)  # no backend handles Vulkan
    assert api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == -1
    assert errors and errors[-1][0] == "ValueError" and "kDLVulkan" in errors[-1][1]


def test_tvm_ffi_takes_gpuport_arrays_through_the_table():
    a = gpuport.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    before = counters()
    t = tvm_ffi.from_dlpack(a)
    d = delta(before, counters())
    assert d.get("producer_exchange_api") == 1 and "producer_dunder" not in d
    assert tuple(t.shape) == (3, 4) and np.array_equal(np.from_dlpack(t), np.from_dlpack(a))
    np.from_dlpack(t)[0, 0] = 99.0
    assert a.tolist()[0][0] == 99.0  # shared memory
    legacy = tvm_ffi.from_dlpack(a.__dlpack__())  # a capsule: the __dlpack__ path
    assert d.get("producer_exchange_api") == 1 and tuple(legacy.shape) == (3, 4)
    assert np.from_dlpack(legacy)[0, 0] == 99.0


def test_gpuport_takes_a_producers_table():
    base = tvm_ffi.from_dlpack(np.arange(6, dtype=np.int64).reshape(2, 3))
    wrapper = tvm_ffi.core.DLTensorTestWrapper(base)
    before = counters()
    via_table = gpuport.from_dlpack(wrapper)
    d = delta(before, counters())
    assert d == {"consumer_exchange_api": 1}, d
    via_dunder = gpuport.from_dlpack(base)
    assert via_table.tolist() == via_dunder.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert (via_table.shape, via_table.strides, via_table.dtype, via_table.device, via_table.data_ptr) == (
        via_dunder.shape, via_dunder.strides, via_dunder.dtype, via_dunder.device, via_dunder.data_ptr)
    copied = gpuport.from_dlpack(wrapper, copy=True)
    assert copied.data_ptr != via_table.data_ptr and copied.tolist() == via_table.tolist()
    moved = gpuport.from_dlpack(wrapper, device="ext:0")
    assert moved.device == gpuport.device("ext:0") and moved.to("host").tolist() == via_table.tolist()
    with pytest.raises(BufferError):
        gpuport.from_dlpack(wrapper, device="ext:0", copy=False)
    with pytest.raises(BufferError):
        gpuport.from_dlpack(base, device="ext:0", copy=False)  # the same error on the other path


def test_gpuport_to_gpuport_uses_its_own_table():
    a = gpuport.asarray([1, 2, 3])
    before = counters()
    b = gpuport.from_dlpack(a)
    d = delta(before, counters())
    assert d == {"consumer_exchange_api": 1, "producer_exchange_api": 1}, d
    assert b.data_ptr == a.data_ptr and b.tolist() == [1, 2, 3]
    del a
    collect()
    assert b.tolist() == [1, 2, 3]


def test_both_paths_give_the_same_errors():
    bad = gpuport.zeros(2, dtype="float32")
    for x in [bad, np.zeros(2, dtype=np.float32)]:
        with pytest.raises(BufferError):
            gpuport.from_dlpack(x, device="ext:0", copy=False)
