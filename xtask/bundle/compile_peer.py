"""Kernels compiled from source on the GPU: gpuport's `RawModule`/`RawKernel` beside
CuPy's, in the same run, on the same GPU (the GPU bundle's run.sh runs it with the
bundle's wheel on PYTHONPATH).

Both compile gpuport's test kernels (`tests/python/fill_and_scale.cu`; CuPy finds
`<gpuport/kernel.h>` in the bundle's `bench/include`, gpuport has it built in), launch
`fill_u32` and `scale<float>` and check the results; then time a cold compile (a fresh
define each time: nothing cached), a compile of the same source again in the process
(gpuport: a new `RawModule`; CuPy: the same, from its cache) and gpuport's disk-cache hit
(in a fresh process, the compile alone timed). Prints `RESULT <metric> <gpuport> <cupy|->
<unit>`. Exits with status 2 when CuPy or a CUDA GPU is missing.
"""

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import cupy
    import numpy as np

    cupy.cuda.runtime.getDeviceCount()
except Exception as exc:  # noqa: BLE001 - any failure means "no peer here"
    print(f"compile_peer: CuPy is not available: {exc}", file=sys.stderr)
    sys.exit(2)

import gpuport

BUNDLE = pathlib.Path(__file__).resolve().parent.parent
SOURCE_FILE = BUNDLE / "tests/python/fill_and_scale.cu"
SOURCE = SOURCE_FILE.read_text()
INCLUDE = f"-I{BUNDLE / 'bench/include'}"


def timed(f, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    os.environ["GPUPORT_KERNEL_CACHE"] = tempfile.mkdtemp(prefix="gpuport-kernel-cache-")
    n = 1 << 20
    grid, block = (n // 256,), (256,)
    # Both kernels, through gpuport, right.
    module = gpuport.RawModule(SOURCE, name_expressions=["scale<float>"], name="fill.cu")
    u = gpuport.zeros((n,), dtype=np.uint32, device="cuda:0")
    module.get_function("fill_u32")(grid, block, (u, np.uint32(n), np.uint32(7)))
    assert (np.asarray(u.to("host")) == 7).all(), "gpuport: fill_u32"
    f = gpuport.asarray(np.full(n, 1.5, dtype=np.float32)).to("cuda:0")
    module.get_function("scale<float>")(grid, block, (f, np.uint32(n), np.float32(2.0)))
    assert (np.asarray(f.to("host")) == 3.0).all(), "gpuport: scale<float>"
    # A CuPy array launched on through the CUDA Array Interface.
    c = cupy.zeros(n, dtype=cupy.uint32)
    module.get_function("fill_u32")(grid, block, (c, np.uint32(n), np.uint32(9)))
    cupy.cuda.Device().synchronize()
    assert int((c == 9).sum()) == n, "gpuport on a CuPy array"
    # The same source through CuPy.
    cmod = cupy.RawModule(code=SOURCE, options=(INCLUDE,), name_expressions=["scale<float>"])
    cmod.get_function("fill_u32")(grid, block, (c, np.uint32(n), np.uint32(5)))
    assert int((c == 5).sum()) == n, "CuPy: fill_u32"

    fresh = iter(range(1_000_000))
    cold_gp = timed(lambda: gpuport.RawModule(SOURCE, options=[f"-DBENCH_FRESH={next(fresh)}"]).compile("cuda:0"), 5)
    cold_cp = timed(lambda: cupy.RawModule(code=SOURCE, options=(INCLUDE, f"-DBENCH_FRESH={next(fresh)}")).compile(), 5)
    gpuport.RawModule(SOURCE).compile("cuda:0")
    again_gp = timed(lambda: gpuport.RawModule(SOURCE).compile("cuda:0"), 200)
    cupy.RawModule(code=SOURCE, options=(INCLUDE,)).compile()
    again_cp = timed(lambda: cupy.RawModule(code=SOURCE, options=(INCLUDE,)).compile(), 200)
    probe = (
        "import time, gpuport; "
        f"src = open({str(SOURCE_FILE)!r}).read(); "
        "t = time.perf_counter(); gpuport.RawModule(src).compile('cuda:0'); print(time.perf_counter() - t)"
    )
    disk = []
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        disk.append(float(done.stdout))
    print(f"RESULT compile_cold_ms {cold_gp * 1e3:.2f} {cold_cp * 1e3:.2f} ms")
    print(f"RESULT compile_again_us {again_gp * 1e6:.2f} {again_cp * 1e6:.2f} us")
    print(f"RESULT compile_disk_hit_ms {statistics.median(disk) * 1e3:.2f} - ms")


if __name__ == "__main__":
    main()
