"""Capsule rules with a producer made here (ctypes), whose deleter counts its calls: the
deleter runs exactly once on every path — last drop, every error, unused capsule — never
for a NULL deleter, and no exception is left pending."""

import sys

import pytest

import gpuport
from conftest import ForeignTensor, capsule_name, collect


@pytest.mark.parametrize("versioned", [True, False])
def test_import_owns_the_tensor_until_the_last_view_dies(versioned):
    t = ForeignTensor(versioned=versioned)
    cap = t.capsule()
    a = gpuport.from_dlpack(cap)
    assert capsule_name(cap) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    view = a[1:]
    del cap, a
    collect()
    assert t.deleted == 0 and view.tolist() == [2.0, 3.0]
    del view
    collect()
    assert t.deleted == 1


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(version=(2, 0)), BufferError),  # a major version this side does not speak
        (dict(ndim=-1), BufferError),
        (dict(ndim=65), BufferError),
        (dict(null_data=True), BufferError),  # NULL data for three elements
        (dict(versioned=False, shape=(-4,)), BufferError),
        # A stride of -1 written as its unsigned byte value divided by the item size, as
        # CuPy 14's DLPack export writes negative strides.
        (dict(stride=(2**64 - 4) // 4), BufferError),
    ],
)
def test_every_error_path_deletes_once_and_leaves_no_exception(kwargs, error):
    t = ForeignTensor(**kwargs)
    cap = t.capsule()
    with pytest.raises(error):
        gpuport.from_dlpack(cap)
    assert t.deleted == 1
    assert sys.exc_info() == (None, None, None)
    with pytest.raises(ValueError, match="already consumed"):
        gpuport.from_dlpack(cap)
    assert t.deleted == 1


def test_a_stride_past_the_address_space_is_named():
    t = ForeignTensor(stride=(2**64 - 4) // 4)
    with pytest.raises(BufferError, match="dimension 0 has 3 elements 4611686018427387903 elements apart"):
        gpuport.from_dlpack(t.capsule())
    assert t.deleted == 1


def test_null_deleter_is_allowed_and_never_called():
    t = ForeignTensor(null_deleter=True)
    a = gpuport.from_dlpack(t.capsule())
    assert a.tolist() == [1.0, 2.0, 3.0]
    del a
    collect()
    assert t.deleted == 0


def test_zero_size_null_data_still_deleted():
    t = ForeignTensor(values=(), null_data=True, shape=(0,))
    a = gpuport.from_dlpack(t.capsule())
    assert a.shape == (0,)
    del a
    collect()
    assert t.deleted == 1


def test_read_only_flag_is_honoured():
    t = ForeignTensor(flags=1)
    a = gpuport.from_dlpack(t.capsule())
    assert a.readonly
    with pytest.raises(TypeError):
        memoryview(a).cast("B")[0] = 1


def test_copy_request_releases_the_original_at_once():
    t = ForeignTensor()
    a = gpuport.from_dlpack(t.capsule(), device="ext:0")
    assert a.device == gpuport.device("ext:0") and a.to("host").tolist() == [1.0, 2.0, 3.0]
    collect()
    assert t.deleted == 1


def test_not_a_dlpack_capsule():
    import ctypes

    other = ctypes.pythonapi.PyCapsule_New
    other.restype = ctypes.py_object
    other.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    with pytest.raises(TypeError):
        gpuport.from_dlpack(other(1, b"something_else", None))



@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_gpuports_own_capsule_deletes_its_tensor_unless_consumed(max_version):
    """An export's capsule that no consumer takes deletes its tensor when it goes (the
    tensor holds the import, which holds the producer's deleter); a consumed one leaves
    the tensor to its consumer. Both capsule kinds."""
    unused = ForeignTensor()
    a = gpuport.from_dlpack(unused.capsule())
    cap = a.__dlpack__(max_version=max_version)
    assert capsule_name(cap) == ("dltensor" if max_version is None else "dltensor_versioned")
    del a
    collect()
    assert unused.deleted == 0, "the unused capsule still holds the import"
    del cap
    collect()
    assert unused.deleted == 1

    consumed = ForeignTensor()
    a = gpuport.from_dlpack(consumed.capsule())
    cap = a.__dlpack__(max_version=max_version)
    b = gpuport.from_dlpack(cap)
    del a, cap
    collect()
    assert consumed.deleted == 0, "the consumer's array holds the tensor"
    del b
    collect()
    assert consumed.deleted == 1
