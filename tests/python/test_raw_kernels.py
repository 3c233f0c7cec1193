"""`gpuport.RawKernel` and `gpuport.RawModule`: kernels compiled from source where they run
(NVRTC on CUDA, hiprtc on ROCm), launched as CuPy's are, on gpuport arrays and on arrays of
other libraries (through the CUDA Array Interface), with typed scalars. Run on the backend
GPUPORT_CONFORMANCE_BACKENDS names (`cargo xtask test --backend cuda|rocm --double` sets
it, with the driver double loaded and the compilers named); the refusals run everywhere."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gpuport

BACKEND = os.environ.get("GPUPORT_CONFORMANCE_BACKENDS", "")
on_vendor = pytest.mark.skipif(BACKEND not in ("cuda", "rocm"), reason="no vendor backend named")

SOURCE = (pathlib.Path(__file__).parent / "fill_and_scale.cu").read_text()


def device():
    return gpuport.device(f"{BACKEND}:0")


def host_values(a):
    return np.asarray(a.to("host"))


@on_vendor
def test_a_raw_kernel_fills_a_gpuport_array():
    a = gpuport.zeros((1000,), dtype=np.uint32, device=device())
    fill = gpuport.RawKernel(SOURCE, "fill_u32")
    assert fill.name == "fill_u32"
    fill((4,), (256,), (a, np.uint32(1000), np.uint32(7)))
    assert (host_values(a) == 7).all()
    # Grid and block as plain ints; the launch orders after the array's earlier work.
    fill(2, 256, (a, np.uint32(500), np.uint32(9)))
    values = host_values(a)
    assert (values[:500] == 9).all() and (values[500:] == 7).all()


@on_vendor
def test_arrays_of_other_libraries_are_launched_on_through_their_interface():
    owner = gpuport.zeros((64,), dtype=np.uint32, device=device())

    class Foreign:
        """An array of another library, seen only through the CUDA Array Interface."""

        def __init__(self, inner):
            self.inner = inner
            self.__cuda_array_interface__ = inner.__cuda_array_interface__

    fill = gpuport.RawKernel(SOURCE, "fill_u32", device=device())
    fill(1, 64, (Foreign(owner), np.uint32(64), np.uint32(0xABCD)))
    assert (host_values(owner) == 0xABCD).all()


@on_vendor
def test_a_raw_module_compiles_templates_by_name():
    module = gpuport.RawModule(SOURCE, name_expressions=["scale<float>"], name="scale.cu")
    module.compile(device())
    fill = module.get_function("fill_u32")
    a = gpuport.zeros((8,), dtype=np.uint32, device=device())
    fill(1, 8, (a, np.uint32(8), np.uint32(3)))
    assert (host_values(a) == 3).all()
    assert module.get_function("scale<float>").name == "scale<float>"


@on_vendor
def test_a_compile_error_raises_with_the_compilers_log():
    broken = "#include <gpuport/kernel.h>\nGPUPORT_KERNEL void f(int* p) { *p = not_declared_anywhere; }\n"
    with pytest.raises(gpuport.CompileError) as caught:
        gpuport.RawKernel(broken, "f", device=device())
    assert "not_declared_anywhere" in caught.value.log
    assert "f.cu" in caught.value.log


@on_vendor
def test_bad_launches_are_refused_with_the_right_exception():
    fill = gpuport.RawKernel(SOURCE, "fill_u32", device=device())
    a = gpuport.zeros((8,), dtype=np.uint32, device=device())
    with pytest.raises(TypeError, match="argument 1 is a str"):
        fill(1, 8, (a, "eight", np.uint32(1)))
    with pytest.raises(ValueError, match="grid"):
        fill(0, 8, (a, np.uint32(8), np.uint32(1)))
    with pytest.raises(ValueError, match="block"):
        fill(1, (1, 2, 3, 4), (a, np.uint32(8), np.uint32(1)))
    with pytest.raises(ValueError, match="an array on host"):
        fill(1, 8, (gpuport.zeros((8,), dtype=np.uint32), np.uint32(8), np.uint32(1)))


def test_a_kernel_without_a_device_or_arrays_says_where_it_cannot_launch():
    fill = gpuport.RawKernel(SOURCE, "fill_u32")
    with pytest.raises(ValueError, match="where to launch"):
        fill(1, 1, (np.uint32(1),))


def test_software_devices_cannot_compile():
    with pytest.raises(ValueError, match="compiling kernels from source"):
        gpuport.RawKernel(SOURCE, "fill_u32", device="host")


@pytest.mark.skipif(
    BACKEND != "cuda" or importlib.util.find_spec("nvidia.cuda_nvrtc") is None,
    reason="needs the CUDA backend and an nvidia-cuda-nvrtc wheel in this environment",
)
def test_nvrtc_is_found_in_this_environments_wheel_without_being_named():
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPORT_NVRTC_LIBRARY", "VIRTUAL_ENV", "CONDA_PREFIX")}
    env["GPUPORT_KERNEL_CACHE"] = "off"
    code = (
        "import gpuport, pathlib; "
        f"gpuport.RawModule(pathlib.Path({str(pathlib.Path(__file__).parent / 'fill_and_scale.cu')!r}).read_text())"
        ".compile('cuda:0')"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
