"""Python as NumPy users write it: every habit below is one a NumPy user has within minutes,
and each gets NumPy's answer (or a clear error where gpuport differs on purpose)."""

import operator

import numpy as np
import pytest

import gpuport


@pytest.mark.parametrize(
    "dtype,name",
    [
        (np.float32, "float32"), (np.float64, "float64"), (np.float16, "float16"), (np.int8, "int8"),
        (np.int16, "int16"), (np.int32, "int32"), (np.int64, "int64"), (np.uint8, "uint8"), (np.uint16, "uint16"),
        (np.uint32, "uint32"), (np.uint64, "uint64"), (np.bool_, "bool"), (np.complex64, "complex64"),
        (np.complex128, "complex128"), (np.intc, "int32"), (np.single, "float32"), (np.double, "float64"),
        (np.dtype("f4"), "float32"), (np.dtype(np.int16), "int16"), ("float32", "float32"), ("<f4", "float32"),
        ("|b1", "bool"), (float, "float64"), (int, "int64"), (bool, "bool"), (complex, "complex128"),
    ],
)
def test_every_numpy_way_to_name_a_dtype(dtype, name):
    for made in (gpuport.zeros(2, dtype=dtype), gpuport.empty(2, dtype=dtype), gpuport.ones(2, dtype=dtype),
                 gpuport.full(2, 1, dtype=dtype), gpuport.asarray([1, 0], dtype=dtype)):
        assert made.dtype == name
    assert gpuport.MirroredArray.zeros(2, dtype=dtype, device="ext:0").dtype == name


def test_a_dtype_numpy_has_and_gpuport_does_not_is_a_clear_error():
    with pytest.raises((TypeError, ValueError), match="dtype"):
        gpuport.zeros(2, dtype=np.str_)
    with pytest.raises(TypeError, match="np.float32"):
        gpuport.zeros(2, dtype=object())


def test_shapes_default_to_float64_as_numpy():
    for make in (gpuport.zeros, gpuport.empty, gpuport.ones):
        assert make((2, 3)).dtype == "float64" == str(np.zeros((2, 3)).dtype)
    assert gpuport.ones(3).tolist() == [1.0, 1.0, 1.0]
    assert gpuport.MirroredArray.zeros(2, device="ext:0").dtype == "float64"


def test_numpy_cannot_silently_make_an_object_array_of_a_device_array():
    d = gpuport.asarray([1.0, 2.0], device="ext:0")
    for convert in (np.asarray, np.array):
        with pytest.raises(TypeError, match=r"copy it to the host first.*to\('host'\)"):
            convert(d)
    assert np.asarray(d.to("host")).tolist() == [1.0, 2.0]


def test_host_arrays_give_numpy_a_view_with_numpy_2_copy_rules():
    h = gpuport.asarray([1.0, 2.0, 3.0])
    view = np.asarray(h)
    view[0] = 7.0
    assert h.tolist()[0] == 7.0, "np.asarray of a host array shares its memory"
    assert h.__array__().tolist() == [7.0, 2.0, 3.0]
    copied = h.__array__(copy=True)
    copied[1] = 0.0
    assert h.tolist()[1] == 2.0, "copy=True copies"
    assert h.__array__(dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="avoid copy"):
        h.__array__(dtype=np.float32, copy=False)
    assert h.__array__(dtype=np.float64, copy=False).dtype == np.float64
    assert np.array(h, copy=False).tolist() == [7.0, 2.0, 3.0]


def test_one_element_arrays_are_python_scalars():
    assert gpuport.asarray([3.5]).item() == 3.5 and isinstance(gpuport.asarray([3.5]).item(), float)
    assert gpuport.asarray([[7]], dtype=np.int32).item() == 7
    assert gpuport.asarray(2.5, device="ext:0").item() == 2.5, "read from the device"
    assert float(gpuport.asarray([3.5])) == 3.5
    assert int(gpuport.asarray([3], dtype="int16")) == 3
    assert int(gpuport.asarray([3.9])) == 3, "int() truncates, as Python's"
    assert complex(gpuport.asarray([1 + 2j])) == 1 + 2j
    assert bool(gpuport.asarray([0])) is False and bool(gpuport.asarray([2])) is True
    assert operator.index(gpuport.asarray([5], dtype="uint8")) == 5
    assert [10, 20, 30][gpuport.asarray([1])] == 20


def test_other_sizes_are_numpys_errors():
    two = gpuport.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="size 1"):
        two.item()
    for convert in (float, int, complex):
        with pytest.raises(TypeError, match="one element"):
            convert(two)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(two)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(gpuport.zeros(0))
    with pytest.raises(TypeError, match="integer"):
        operator.index(gpuport.asarray([1.5]))
    with pytest.raises(TypeError):
        float(gpuport.asarray([1 + 2j]))


def test_len_is_the_first_extent():
    assert len(gpuport.zeros((4, 2))) == 4 and len(gpuport.zeros(0)) == 0
    with pytest.raises(TypeError):
        len(gpuport.asarray(1.0))


def test_comparison_never_answers_identity():
    a = gpuport.asarray([1.0, 2.0])
    for compare in (operator.eq, operator.ne, operator.lt):
        with pytest.raises(TypeError, match="does not compare elements"):
            compare(a, a)
        with pytest.raises(TypeError):
            compare(a, gpuport.asarray([1.0, 2.0]))
    with pytest.raises(TypeError):
        hash(a)
    assert a is a


def test_devices_lists_every_available_device():
    listed = gpuport.devices()
    assert gpuport.device("host") in listed
    expected = [d for b in gpuport.backends() if b.available for d in b.devices]
    assert [str(d) for d in listed] == expected


def test_strings_and_mixed_lists_name_the_element_type():
    with pytest.raises(TypeError, match="type str"):
        gpuport.asarray(["a", "b"])
    with pytest.raises(TypeError, match="type str"):
        gpuport.asarray([1, "a"])
    with pytest.raises(TypeError, match="type NoneType"):
        gpuport.asarray([[1.0], [None]])
    with pytest.raises(ValueError, match="ragged"):
        gpuport.asarray([[1, 2], [3]])


def test_nesting_deeper_than_an_array_can_be_is_refused_not_recursed():
    deep = 1.0
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ValueError, match="64 dimensions"):
        gpuport.asarray(deep)


def test_to_device_is_the_array_api_name_of_to():
    h = gpuport.asarray([1.0, 2.0])
    e = h.to_device("ext:0")
    assert str(e.device) == "ext:0" and e.to_device("host").tolist() == [1.0, 2.0]
    assert h.to_device("host") is h, "already there: the array itself, as the standard allows"
    s = gpuport.device("ext:1").create_stream()
    assert h.to_device(gpuport.device("ext:1"), stream=s).to("host").tolist() == [1.0, 2.0]


def test_the_ext_test_device_is_listed_only_when_asked_for():
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import gpuport
        assert not any(str(d).startswith("ext") for d in gpuport.devices()), gpuport.devices()
        try:
            gpuport.device("ext:0")
        except ValueError as e:
            assert "gpuport.register_ext()" in str(e), e
        else:
            raise SystemExit("ext:0 opened without being asked for")
        before = gpuport.asarray([1.0, 2.0])
        gpuport.register_ext()
        assert "ext:0" in [str(d) for d in gpuport.devices()]
        assert before.to("ext:0").to("host").tolist() == [1.0, 2.0], "arrays from before stay usable"
        print("asked")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "GPUPORT_EXT"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "asked" in done.stdout, done.stdout + done.stderr
