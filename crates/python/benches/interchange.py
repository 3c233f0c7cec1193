"""The Python side of the interchange, each figure beside its floor in the same process.

Run by `cargo xtask bench` against the wheel users get (the `wheel` profile; never the
dev-profile build, which is several times slower): `python interchange.py OUT`. Every figure is measured in
rounds — floor, then gpuport — and each measurement is the median of several repeats of
a timed loop; OUT has two lines per figure, `NAME floor NS…` and `NAME gpuport NS…`, the
nanoseconds per call of every round (the table takes the median of the rounds' ratios,
as for the HAL).

Floors are the same exchange done by NumPy (its own `__dlpack__` and `from_dlpack`), by
apache-tvm-ffi (a consumer and producer of the C exchange API), by a dict built in
Python, or — for the C exchange API — by a C loop calling a hand-written producer that
makes the same one allocation and fills the same descriptor. A figure whose peer is not
installed is left out of OUT (the table says "not measured").

`GPUPORT_BENCH_ROUNDS` (default 1) sets the rounds; `GPUPORT_BENCH_QUICK=1` times
shorter loops (the CI smoke run: every figure runs, nothing is judged).
"""

import ctypes
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import timeit

import numpy as np

import gpuport as gp

ROUNDS = max(1, int(os.environ.get("GPUPORT_BENCH_ROUNDS", "1")))
QUICK = os.environ.get("GPUPORT_BENCH_QUICK") == "1"
# Seconds of one timed loop, and timed loops per measurement (their median is taken).
LOOP_SECONDS = 0.02 if QUICK else 0.1
REPEATS = 3 if QUICK else 7

HERE = os.path.dirname(os.path.abspath(__file__))


def per_call_ns(stmt, env):
    """Median nanoseconds per execution of `stmt` (a statement string, so the timed loop
    adds no Python call of its own) over REPEATS loops of about LOOP_SECONDS each."""
    timer = timeit.Timer(stmt, globals=env)
    number, _ = timer.autorange()
    number = max(1, int(number * LOOP_SECONDS / 0.2))
    return statistics.median(t / number * 1e9 for t in timer.repeat(REPEATS, number))


def c_helper():
    """The C loops (exchange_loop.c) as a library, compiled here with the system C
    compiler; None when there is none."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    out = os.path.join(tempfile.mkdtemp(prefix="gpuport-bench-"), "exchange_loop.so")
    src = os.path.join(HERE, "exchange_loop.c")
    try:
        subprocess.run(cc.split() + ["-O2", "-shared", "-fPIC", "-o", out, src], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"interchange bench: no C compiler ({e}); the C exchange figure is left out", file=sys.stderr)
        return None
    # PyDLL keeps the GIL held across the call, as the exchange API requires.
    lib = ctypes.PyDLL(out)
    for name in ("gp_exchange_loop", "hand_exchange_loop"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_double
    lib.gp_exchange_loop.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_long]
    lib.hand_exchange_loop.argtypes = [ctypes.py_object, ctypes.c_long]
    return lib


def c_loop_ns(run):
    """Median nanoseconds per exchange of a C loop (`run(n)` gives the loop's total)."""
    n = 20_000 if QUICK else 200_000
    samples = []
    for _ in range(REPEATS):
        total = run(n)
        if total < 0:
            raise RuntimeError("the exchange failed inside the C loop")
        samples.append(total / n)
    return statistics.median(samples)


def figures():
    """(name, floor, gpuport): each a function measuring ns per call."""
    host_np = np.arange(128, dtype=np.float32).reshape(8, 16)
    host_gp = gp.from_dlpack(host_np)
    gp.register_ext()
    ext_gp = gp.asarray(host_np, device="ext:0")
    env = {"np": np, "gp": gp, "a": host_np, "g": host_gp, "e": ext_gp}

    def stmt(text):
        return lambda: per_call_ns(text, env)

    out = [
        ("py_np_from_gp", stmt("np.from_dlpack(a)"), stmt("np.from_dlpack(g)")),
        ("py_gp_from_np", stmt("np.from_dlpack(a)"), stmt("gp.from_dlpack(a)")),
        ("py_gp_from_gp", stmt("np.from_dlpack(a)"), stmt("gp.from_dlpack(g)")),
        ("py_dunder", stmt("a.__dlpack__()"), stmt("g.__dlpack__()")),
    ]

    # The CUDA Array Interface's dict. Python offers `__cuda_array_interface__` on CUDA and
    # ROCm arrays only, so the read is timed through its host sibling,
    # `__array_interface__`, built by the same code (export, neutral form, dict) less the
    # `stream` key, against the same dict built in Python. The import is
    # `from_cuda_array_interface` of a dict over ext device memory (its owner found by
    # pointer attributes), against NumPy importing the host sibling.
    env["ptr"] = host_gp.data_ptr
    env["d"] = {
        "shape": (8, 16),
        "typestr": "<f4",
        "data": (ext_gp.data_ptr, False),
        "version": 3,
        "strides": None,
        "stream": None,
    }

    class HostInterface:
        __array_interface__ = host_np.__array_interface__

    env["h"] = HostInterface()
    built = "{'shape': (8, 16), 'typestr': '<f4', 'data': (ptr, False), 'version': 3, 'strides': None, 'descr': [('', '<f4')]}"
    out += [
        ("py_cai_read", stmt(built), stmt("g.__array_interface__")),
        ("py_cai_import", stmt("np.asarray(h)"), stmt("gp.from_cuda_array_interface(d, owner=e)")),
    ]

    try:
        import tvm_ffi
    except ImportError:
        print("interchange bench: apache-tvm-ffi is not installed; its figures are left out", file=sys.stderr)
        tvm_ffi = None
    if tvm_ffi is not None:
        env["tvm_ffi"] = tvm_ffi
        env["w"] = tvm_ffi.core.DLTensorTestWrapper(tvm_ffi.from_dlpack(host_np))
        out += [
            ("py_gp_from_table", stmt("tvm_ffi.from_dlpack(a)"), stmt("gp.from_dlpack(w)")),
            ("py_tvm_from_gp", stmt("tvm_ffi.from_dlpack(a)"), stmt("tvm_ffi.from_dlpack(g)")),
        ]

    lib = c_helper()
    if lib is not None:
        table = gp.Array.__c_dlpack_exchange_api__
        out.append(
            (
                "c_exchange",
                lambda: c_loop_ns(lambda n: lib.hand_exchange_loop(host_gp, n)),
                lambda: c_loop_ns(lambda n: lib.gp_exchange_loop(table, host_gp, n)),
            )
        )
    return out


def main():
    results = {}
    for name, floor, ours in figures():
        rounds = {"floor": [], "gpuport": []}
        for _ in range(ROUNDS):
            rounds["floor"].append(floor())
            rounds["gpuport"].append(ours())
        results[name] = rounds
        print(f"{name}: floor {rounds['floor']} ns, gpuport {rounds['gpuport']} ns", file=sys.stderr)
    with open(sys.argv[1], "w") as f:
        for name, rounds in results.items():
            for side in ("floor", "gpuport"):
                f.write(" ".join([name, side] + [f"{ns:.3f}" for ns in rounds[side]]) + "\n")


if __name__ == "__main__":
    main()
