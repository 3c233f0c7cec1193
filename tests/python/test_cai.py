"""The CUDA Array Interface glue on the CPU: dicts in and out, validation errors as Python
exceptions, lifetimes. The ext device stands in for a GPU (its pointers are resolved by
pointer attributes like a GPU's); arrays on CUDA are tested in test_gpu.py."""

import sys

import pytest

import gpuport
from conftest import collect


def interface(a, **over):
    d = {"shape": a.shape, "typestr": "<f4", "data": (a.data_ptr, False), "version": 3, "strides": None,
         "stream": None}
    d.update(over)
    return d


def test_from_cuda_array_interface_shares_memory_and_holds_the_owner():
    a = gpuport.asarray([[1.0, 2.0], [3.0, 4.0]], dtype="float32").to("ext:0")
    before = sys.getrefcount(a)
    b = gpuport.from_cuda_array_interface(interface(a), owner=a)
    assert b.device == gpuport.device("ext:0") and b.data_ptr == a.data_ptr
    assert b.to("host").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert sys.getrefcount(a) == before + 1
    del b
    collect()
    assert sys.getrefcount(a) == before
    t = gpuport.from_cuda_array_interface(interface(a, shape=(2,), strides=(8,)), owner=a)
    assert t.to("host").tolist() == [1.0, 3.0]
    ro = gpuport.from_cuda_array_interface(interface(a, data=(a.data_ptr, True)), owner=a)
    assert ro.readonly
    empty = gpuport.from_cuda_array_interface(interface(a, shape=(0,), data=(0, False)), device="ext:1")
    assert empty.shape == (0,) and empty.device == gpuport.device("ext:1")


class Producer:
    def __init__(self, a, **over):
        self.a = a
        self.__cuda_array_interface__ = interface(a, **over)


def test_as_array_keeps_the_producer_alive_and_knows_sync_policies():
    a = gpuport.asarray([5.0, 6.0], dtype="float32").to("ext:0")
    p = Producer(a)
    before = sys.getrefcount(p)
    for sync in ["enqueue", "host", "ignore"]:
        g = gpuport.as_array(p, sync=sync)
        assert g.data_ptr == a.data_ptr and sys.getrefcount(p) == before + 1
        del g
        collect()
    s = gpuport.device("ext:0").create_stream()
    g = gpuport.as_array(Producer(a, stream=s.handle))
    assert g.to("host").tolist() == [5.0, 6.0]
    with pytest.raises(ValueError, match="sync"):
        gpuport.as_array(p, sync="sometimes")
    with pytest.raises(TypeError):
        gpuport.as_array(object())


def test_dlpack_export_of_a_cai_import():
    a = gpuport.asarray([1.0, 2.0, 3.0], dtype="float32").to("ext:1")
    g = gpuport.as_array(Producer(a))
    h = gpuport.from_dlpack(g, device="host")
    assert h.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "over, error",
    [
        (dict(mask=object()), NotImplementedError),
        (dict(stream=0), ValueError),
        (dict(version=4), ValueError),
        (dict(typestr=">f4"), ValueError),
        (dict(typestr="<f3"), ValueError),
        (dict(data=(0, False)), ValueError),
        (dict(data=[1, False]), ValueError),
        (dict(strides=(3,)), ValueError),
        (dict(shape=(-1,)), ValueError),
        (dict(descr=[("", "<i4")]), ValueError),
        (dict(stream="1"), ValueError),
    ],
)
def test_bad_interfaces_get_the_right_exception(over, error):
    a = gpuport.zeros(2, dtype="float32", device="ext:0")
    with pytest.raises(error):
        gpuport.from_cuda_array_interface(interface(a, **over), owner=a)


def test_missing_keys_and_wrong_types():
    a = gpuport.zeros(2, dtype="float32", device="ext:0")
    d = interface(a)
    del d["typestr"]
    with pytest.raises(ValueError, match="typestr"):
        gpuport.from_cuda_array_interface(d)
    with pytest.raises(TypeError):
        gpuport.from_cuda_array_interface([("shape", (2,))])
    with pytest.raises(ValueError, match="belongs to no device"):
        gpuport.from_cuda_array_interface(interface(a, data=(8, False)))
