"""The module's API without any peer library: backends, devices, streams, events,
creation, indexing, views, copies and the exceptions bad input gets."""

import os

import pytest

import gpuport


def test_backends_report_every_backend_with_reason():
    backends = {b.name: b for b in gpuport.backends()}
    assert {"host", "cuda", "rocm", "ext"} <= set(backends)
    host = backends["host"]
    assert host.available and host.reason is None and host.devices == ["host:0"]
    assert backends["ext"].available and backends["ext"].devices[:2] == ["ext:0", "ext:1"]
    for b in backends.values():
        assert b.available == (b.reason is None)
        if not b.available:
            assert b.reason and b.devices == []


def test_device_properties_equality_and_repr():
    h = gpuport.device()
    assert (h.kind, h.index) == ("host", 0) and h == gpuport.device("host")
    e = gpuport.device("ext:1")
    assert (e.kind, e.index, e.__dlpack_device__()) == ("ext", 1, (12, 1))
    assert e != gpuport.device("ext:0") and len({e, gpuport.device("ext:1"), h}) == 2
    assert repr(e) == "Device('ext:1')" and str(e) == "ext:1" and isinstance(e.name, str)
    assert h.__dlpack_device__() == (1, 0)
    assert gpuport.device((12, 0)) == gpuport.device("ext:0")


def test_streams_and_events():
    for spec in ["host", "ext:0"]:
        d = gpuport.device(spec)
        s, t = d.create_stream(), d.create_stream()
        assert s.handle != t.handle and s.device == d
        start = s.record()
        done = s.record(d.create_event())
        t.wait_event(done)
        t.synchronize()
        done.synchronize()
        assert s.query() and done.query() and t.query()
        assert start.elapsed_time(done) >= 0.0
        d.synchronize()
        other = gpuport.device("host" if spec == "ext:0" else "ext:0")
        with pytest.raises(ValueError):
            s.wait_event(other.create_event())  # another backend's event


def test_creation_functions():
    a = gpuport.zeros((2, 3))  # float64 by default, as NumPy's
    assert (a.shape, a.dtype, a.ndim, a.size, a.nbytes, a.strides) == ((2, 3), "float64", 2, 6, 48, (24, 8))
    assert a.tolist() == [[0.0] * 3] * 2 and not a.readonly and a.device == gpuport.device("host")
    f = gpuport.full(4, 7, dtype="int16", device="ext:0")
    assert f.device == gpuport.device("ext:0") and f.tolist() == [7] * 4 and f.dtype == "int16"
    assert gpuport.full((), 2.5).dtype == "float64" and gpuport.full((), True).tolist() is True
    assert gpuport.full(2, 1 + 2j).tolist() == [1 + 2j] * 2
    assert gpuport.empty(5, dtype="uint8").shape == (5,)
    assert gpuport.asarray([[1, 2], [3, 4]]).dtype == "int64"
    assert gpuport.asarray([1.5, 2]).dtype == "float64"
    assert gpuport.asarray([True, False]).dtype == "bool"
    assert gpuport.asarray(3).shape == ()
    assert gpuport.asarray([[1, 2]], dtype="float16").tolist() == [[1.0, 2.0]]
    assert gpuport.asarray([1.0, 3.0], dtype="bfloat16").tolist() == [1.0, 3.0]
    assert gpuport.asarray([], dtype="float32").shape == (0,)
    for name in ["int8", "uint64", "float64", "complex64", "bool", "<f4", float, int, bool, complex]:
        gpuport.zeros(1, dtype=name)


def test_indexing_views_share_memory():
    a = gpuport.asarray([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype="int32")
    assert a[1].tolist() == [4, 5, 6, 7]
    assert a[-1, -1].tolist() == 11 and a[-1, -1].shape == ()
    assert a[1:, ::2].tolist() == [[4, 6], [8, 10]]
    assert a[::-1, ::-2].tolist() == [[11, 9], [7, 5], [3, 1]]
    assert a[..., 1].tolist() == [1, 5, 9]
    assert a[5:].shape == (0, 4) and a[:, 3:0:-2].tolist() == [[3, 1], [7, 5], [11, 9]]
    v = a[1:, 1:]
    assert v.data_ptr == a.data_ptr + 4 * 4 + 4 and v.strides == (16, 4)
    assert len(a) == 3
    with pytest.raises(IndexError):
        a[3]
    with pytest.raises(IndexError):
        a[0, 0, 0]
    with pytest.raises(TypeError):
        a[[0, 1]]
    with pytest.raises(TypeError):
        len(a[0, 0])


def test_to_and_copy():
    a = gpuport.asarray([[1.0, 2.0], [3.0, 4.0]])
    e = a[:, ::-1].to("ext:0")
    assert e.device == gpuport.device("ext:0") and e.tolist() == [[2.0, 1.0], [4.0, 3.0]]
    s = gpuport.device("ext:1").create_stream()
    e1 = e.to(gpuport.device("ext:1"), stream=s)
    assert e1.to("host").tolist() == [[2.0, 1.0], [4.0, 3.0]]
    c = a.copy()
    assert c.data_ptr != a.data_ptr and c.tolist() == a.tolist()


def test_bad_input_gets_the_right_exception():
    with pytest.raises(ValueError):
        gpuport.device("nope:0")
    with pytest.raises(ValueError):
        gpuport.device("ext:99")
    with pytest.raises(TypeError):
        gpuport.device(3.5)
    with pytest.raises(ValueError):
        gpuport.zeros(3, dtype="float33")
    with pytest.raises(TypeError):
        gpuport.zeros(3, dtype=3.5)
    with pytest.raises(ValueError):
        gpuport.zeros(-1)
    with pytest.raises(TypeError):
        gpuport.zeros("abc")
    with pytest.raises(ValueError):
        gpuport.asarray([[1, 2], [3]])
    with pytest.raises(OverflowError):
        gpuport.asarray([300], dtype="uint8")
    with pytest.raises(ValueError):
        gpuport.asarray(gpuport.zeros(2), dtype="float32")
    with pytest.raises(TypeError):
        gpuport.asarray(object())
    with pytest.raises(TypeError):
        gpuport.full(3, [1, 2])


def test_unavailable_backend_is_backend_unavailable():
    missing = [b for b in gpuport.backends() if not b.available]
    if not missing:
        pytest.skip("every backend is available here")
    b = missing[0]
    with pytest.raises(gpuport.BackendUnavailable) as info:
        gpuport.device(f"{b.name}:0")
    assert isinstance(info.value, RuntimeError)
    assert info.value.reason and b.name in info.value.reason


def test_host_protocols_only_on_host_arrays():
    h, e = gpuport.zeros(3), gpuport.zeros(3, device="ext:0")
    assert hasattr(h, "__array_interface__") and not hasattr(e, "__array_interface__")
    assert not hasattr(h, "__cuda_array_interface__") and not hasattr(e, "__cuda_array_interface__")
    m = memoryview(h)
    assert (m.format, m.shape, m.strides, m.readonly) == ("d", (3,), (8,), False)
    with pytest.raises(BufferError):
        memoryview(e)
    with pytest.raises(BufferError):
        memoryview(gpuport.zeros(2, dtype="bfloat16"))


@pytest.mark.skipif(os.environ.get("GPUPORT_REQUIRE_CUDA") != "1", reason="GPUPORT_REQUIRE_CUDA=1 not set")
def test_cuda_is_found_where_a_gpu_is():
    """The GPU bundle sets GPUPORT_REQUIRE_CUDA=1 where nvidia-smi sees a GPU: the GPU
    tests must then run, not skip."""
    cuda = next(b for b in gpuport.backends() if b.name == "cuda")
    assert cuda.available, cuda.reason


def test_messages_and_reprs_are_written_as_python_writes_them():
    with pytest.raises(ValueError) as bad:
        gpuport.asarray([1.5], dtype="int32")
    assert str(bad.value) == "1.5 is not an integer (dtype int32)"
    with pytest.raises(ValueError) as bad:
        gpuport.zeros((2, 3))[0] = gpuport.zeros(2)
    assert "(2,)" in str(bad.value) and "(3,)" in str(bad.value) and "[" not in str(bad.value)
    host = [b for b in gpuport.backends() if b.name == "host"][0]
    assert repr(host) == "<gpuport.Backend host available, devices ['host:0']>"


def test_small_arrays_show_their_values_large_ones_their_shape():
    a = gpuport.asarray([[1, 2], [3, 4]], dtype="int32")
    assert repr(a) == "gpuport.Array([[1, 2], [3, 4]], dtype=int32, device='host:0')"
    assert str(a) == repr(a)
    on_ext = gpuport.asarray([1.5, 2.0], dtype="float64").to("ext:0")
    assert repr(on_ext) == "gpuport.Array([1.5, 2.0], dtype=float64, device='ext:0')"
    big = gpuport.zeros((10, 200), dtype="float32")
    assert repr(big) == "gpuport.Array(shape=(10, 200), dtype=float32, device='host:0')"
