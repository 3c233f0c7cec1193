"""Foreign arrays are checked against the allocation they claim, and foreign structures
cannot exhaust the stack: every import path (the CUDA Array Interface, DLPack,
`__array_interface__`) refuses a span that does not lie inside one live allocation of the
device that owns it — shapes larger than the allocation, spans that start inside and end
outside, negative strides reaching below it — and a dict nested thousands deep is read to
a bounded depth. Run under AddressSanitizer by `cargo xtask sanitize address`: a read past
an allocation is a report there, not only a wrong answer."""

import ctypes
import sys

import numpy as np
import pytest

import gpuport
from conftest import DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, VERSIONED_DELETER, _capsule_new


def ext_array(n=16):
    return gpuport.asarray(np.arange(n, dtype=np.uint8)).to("ext:0")


def cai(ptr, shape, strides=None, typestr="|u1", **extra):
    d = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3, "strides": strides}
    d.update(extra)
    return d


# (shape, strides, byte offset of element 0 from the allocation's start): each reaches
# outside a 16-byte allocation.
OUTSIDE = [
    ((4096,), None, 0),           # far past the end
    ((1 << 28,), None, 0),        # a quarter GiB past it
    ((17,), None, 0),             # one byte past it
    ((16,), None, 8),             # starts inside, ends outside
    ((4,), (-8,), 7),             # negative strides reaching below the start
    ((2, 16), (16, 1), 0),        # a second row past the end
]


@pytest.mark.parametrize("shape,strides,at", OUTSIDE)
def test_cai_spans_outside_their_allocation_are_refused(shape, strides, at):
    a = ext_array()
    with pytest.raises(ValueError, match="outside their allocation"):
        gpuport.from_cuda_array_interface(cai(a.data_ptr + at, shape, strides), owner=a)


def test_cai_spans_inside_their_allocation_are_imported():
    a = ext_array()
    whole = gpuport.from_cuda_array_interface(cai(a.data_ptr, (16,)), owner=a)
    assert whole.to("host").tolist() == list(range(16))
    tail = gpuport.from_cuda_array_interface(cai(a.data_ptr + 8, (8,)), owner=a)
    assert tail.to("host").tolist() == list(range(8, 16))
    reversed_ = gpuport.from_cuda_array_interface(cai(a.data_ptr + 15, (16,), (-1,)), owner=a)
    assert reversed_.to("host").tolist() == list(range(15, -1, -1))
    empty = gpuport.from_cuda_array_interface(cai(0, (0,)), owner=a, device="ext:0")
    assert empty.shape == (0,)


def test_a_write_through_an_oversized_import_never_happens():
    a = ext_array()
    before = a.to("host").tolist()
    with pytest.raises(ValueError):
        big = gpuport.from_cuda_array_interface(cai(a.data_ptr, (4096,)), owner=a)
        big[...] = 0  # never reached
    assert a.to("host").tolist() == before


def test_device_memory_no_allocation_holds_is_refused():
    a = ext_array()
    # An ext address in no allocation: past the end, in the gap between allocations.
    with pytest.raises(ValueError):
        gpuport.from_cuda_array_interface(cai(a.data_ptr + 1024, (4,)), owner=a)


class ExtTensor:
    """A DLPack producer claiming `shape` bytes of an ext allocation from `offset` on,
    whose deleter counts its calls."""

    def __init__(self, array, shape, offset=0, stride=1):
        self.array = array
        self.deleted = 0
        self.shape = (ctypes.c_int64 * 1)(shape)
        self.strides = (ctypes.c_int64 * 1)(stride)
        self.deleter = VERSIONED_DELETER(self._delete)
        tensor = DLTensor(data=array.data_ptr + offset, device=DLDevice(12, 0), ndim=1, dtype=DLDataType(1, 8, 1),
                          shape=self.shape, strides=self.strides, byte_offset=0)
        self.managed = DLManagedTensorVersioned(version=DLPackVersion(1, 1), manager_ctx=None, deleter=self.deleter,
                                                flags=0, dl_tensor=tensor)

    def _delete(self, _ptr):
        self.deleted += 1

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor_versioned", None)


@pytest.mark.parametrize("shape,offset,stride", [(4096, 0, 1), (1 << 28, 0, 1), (16, 8, 1), (4, 7, -8)])
def test_dlpack_spans_outside_their_allocation_are_refused_and_deleted_once(shape, offset, stride):
    a = ext_array()
    t = ExtTensor(a, shape, offset, stride)
    with pytest.raises(BufferError, match="outside their allocation"):
        gpuport.from_dlpack(t.capsule())
    assert t.deleted == 1


def test_dlpack_spans_inside_their_allocation_are_imported():
    a = ext_array()
    t = ExtTensor(a, 8, 8)
    b = gpuport.from_dlpack(t.capsule())
    assert b.to("host").tolist() == list(range(8, 16))
    del b
    assert t.deleted == 1


class Interfaced:
    """A host object exporting `interface` as its `__array_interface__`."""

    def __init__(self, interface, keep):
        self.__array_interface__ = interface
        self.keep = keep


def test_array_interface_spans_outside_a_gpuport_host_allocation_are_refused():
    # Host memory gpuport allocated is registered, so its extent is known.
    a = gpuport.zeros((16,), dtype="uint8")
    inside = gpuport.asarray(Interfaced(cai(a.data_ptr, (16,)), a))
    assert inside.tolist() == [0] * 16
    with pytest.raises(ValueError, match="outside their allocation"):
        gpuport.asarray(Interfaced(cai(a.data_ptr, (1 << 20,)), a))


def deep(levels):
    v = 1
    for _ in range(levels):
        v = [v]
    return v


def test_unknown_keys_are_not_read_however_deep():
    a = ext_array()
    b = gpuport.from_cuda_array_interface(cai(a.data_ptr, (16,), unknown=deep(10_000)), owner=a)
    assert b.shape == (16,)


@pytest.mark.parametrize("key", ["descr", "shape", "strides", "data"])
def test_deep_values_under_protocol_keys_are_refused(key):
    a = ext_array()
    with pytest.raises(ValueError, match="nested more than"):
        gpuport.from_cuda_array_interface({**cai(a.data_ptr, (16,)), key: deep(10_000)}, owner=a)


def test_deep_dicts_through_as_array_and_asarray_are_refused():
    a = ext_array()

    class Producer:
        __cuda_array_interface__ = {**cai(a.data_ptr, (16,)), "descr": deep(10_000), "x": deep(10_000)}

    with pytest.raises(ValueError, match="nested more than"):
        gpuport.as_array(Producer())
    host = gpuport.zeros((4,), dtype="uint8")
    with pytest.raises(ValueError, match="nested more than"):
        gpuport.asarray(Interfaced({**cai(host.data_ptr, (4,)), "shape": deep(10_000)}, host))


def test_shared_and_huge_values_are_read_to_a_bounded_number_of_values():
    a = ext_array()
    shared = 1
    for _ in range(40):
        shared = [shared, shared]  # 41 objects, 2**40 paths
    with pytest.raises(ValueError, match="past the first"):
        gpuport.from_cuda_array_interface({**cai(a.data_ptr, (16,)), "descr": shared}, owner=a)
    with pytest.raises(ValueError, match="a sequence of 1000000 items"):
        gpuport.from_cuda_array_interface({**cai(a.data_ptr, (16,)), "strides": (1,) * 1_000_000}, owner=a)
    with pytest.raises(ValueError, match="str of 100003 bytes"):
        gpuport.from_cuda_array_interface({**cai(a.data_ptr, (16,)), "typestr": "|u1" + " " * 100_000}, owner=a)


def test_the_recursion_limit_is_not_what_stops_it():
    # Far below Python's own recursion limit: the bound is gpuport's, not the interpreter's.
    a = ext_array()
    with pytest.raises(ValueError, match="nested more than"):
        gpuport.from_cuda_array_interface({**cai(a.data_ptr, (16,)), "descr": deep(40)}, owner=a)
    assert sys.getrecursionlimit() > 40


# ---- Exceptions survive a drop that runs Python code -------------------------------------


def probing_tensor():
    """A producer whose deleter is Python code (called through ctypes) that looks an
    attribute up and handles its absence, as ordinary Python does: run while an exception
    is pending, the lookup's own AttributeError would replace it and be cleared, losing it."""
    from conftest import ForeignTensor

    class Probing(ForeignTensor):
        def _delete(self, ptr):
            assert not hasattr(self, "no_such_attribute")
            super()._delete(ptr)

    return Probing()


def test_an_exception_unwinding_past_an_import_with_a_python_deleter_survives():
    t = probing_tensor()

    def holds_an_import_and_raises():
        a = gpuport.from_dlpack(t.capsule())
        assert a.tolist() == [1.0, 2.0, 3.0]
        raise KeyError("the caller's own error")

    # The frame's locals (the import) are dropped while the KeyError is being raised: the
    # deleter runs then, and the KeyError must come out as it went in.
    with pytest.raises(KeyError, match="the caller's own error"):
        holds_an_import_and_raises()
    assert t.deleted == 1


def test_a_gpuport_error_raised_while_an_import_is_dropped_survives():
    t = probing_tensor()
    # The import is made, then refused (copy=False to another device): the array holding
    # the producer's deleter is dropped on the way to raising gpuport's error.
    with pytest.raises(BufferError, match="copy=False"):
        gpuport.from_dlpack(t.capsule(), device="ext:0", copy=False)
    assert t.deleted == 1


# C code drops references on its error paths after setting the exception (`PyErr_Set…`,
# then `Py_DECREF` of its temporaries): gpuport's array may be one of them.
DROP_WITH_PENDING = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Sets KeyError, then drops the last reference to `obj`, as a C error path does. */
void drop_with_pending(PyObject *obj) {
    PyErr_SetString(PyExc_KeyError, "set before the drop");
    Py_DECREF(obj);
}
"""


@pytest.fixture(scope="module")
def drop_with_pending(tmp_path_factory):
    import shutil
    import subprocess
    import sysconfig

    cc = shutil.which("cc")
    include = sysconfig.get_config_var("INCLUDEPY")
    if cc is None or include is None:
        pytest.skip("no C compiler or Python headers to build the helper")
    out = tmp_path_factory.mktemp("pending")
    (out / "pending.c").write_text(DROP_WITH_PENDING)
    lib = out / "libpending.so"
    subprocess.run([cc, "-shared", "-fPIC", "-I", include, str(out / "pending.c"), "-o", str(lib)], check=True)
    f = ctypes.PyDLL(str(lib)).drop_with_pending
    f.argtypes = [ctypes.c_void_p]
    f.restype = None
    return f


@pytest.mark.parametrize("how", ["dlpack", "cai-owner", "unused-capsule"])
def test_an_import_dropped_by_c_code_with_an_exception_set_keeps_it(drop_with_pending, how):
    t = probing_tensor()
    if how == "dlpack":
        a = gpuport.from_dlpack(t.capsule())
    elif how == "unused-capsule":
        # gpuport's own capsule, never consumed: its destructor deletes the tensor, which
        # holds the import, which holds the producer's deleter.
        a = gpuport.from_dlpack(t.capsule()).__dlpack__()
    else:
        # An owner whose last reference goes with the array: its __del__ is Python code.
        host = gpuport.zeros((4,), dtype="uint8")

        class Owner:
            def __del__(self):
                t._delete(None)

        a = gpuport.from_cuda_array_interface(cai(host.data_ptr, (4,)), owner=Owner(), sync="ignore")
    address = id(a)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(a))  # the reference the C code drops
    del a
    # PyDLL raises the exception set when the call returns: it must be the one C set.
    with pytest.raises(KeyError, match="set before the drop"):
        drop_with_pending(address)
    assert t.deleted == 1


def test_a_deleter_that_raises_is_reported_as_unraisable_and_loses_nothing(monkeypatch):
    from conftest import ForeignTensor

    class Raising(ForeignTensor):
        def _delete(self, ptr):
            super()._delete(ptr)
            raise RuntimeError("a deleter's own error")

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    t = Raising()
    a = gpuport.from_dlpack(t.capsule())
    with pytest.raises(KeyError, match="pending"):
        try:
            raise KeyError("pending")
        finally:
            del a
    assert t.deleted == 1
    assert [str(e) for e in reported] == ["a deleter's own error"], reported
