"""`gpuport.distributed` on NCCL (over the CUDA double) and RCCL (over the HIP doubles): the
engine listed as available, one communicator over both simulated devices from
`init_all`, collectives on device arrays issued together in `with group():` and checked
against NumPy, and what the block and the engines refuse. Run for the backend named in
GPUPORT_CONFORMANCE_BACKENDS (`cargo xtask test --backend cuda|rocm --double` sets it,
with the double's engine named by GPUPORT_NCCL_LIBRARY / GPUPORT_RCCL_LIBRARY); skipped
otherwise."""

import os
import re

import numpy as np
import pytest

import gpuport
from gpuport import distributed

BACKEND = os.environ.get("GPUPORT_CONFORMANCE_BACKENDS", "")
pytestmark = pytest.mark.skipif(
    BACKEND not in ("cuda", "rocm"), reason="GPUPORT_CONFORMANCE_BACKENDS names no vendor backend"
)
ENGINE = {"cuda": "NCCL", "rocm": "RCCL"}.get(BACKEND)
DEVICES = [f"{BACKEND}:0", f"{BACKEND}:1"]


def on(rank, values, dtype=np.float32):
    return gpuport.asarray(np.asarray(values, dtype=dtype)).to(DEVICES[rank])


def test_the_engine_is_available_with_its_version_and_place():
    engine = next(e for e in distributed.engines() if e.name == ENGINE)
    assert engine.available and engine.reason is None, engine
    assert engine.version.startswith(f"{ENGINE} 2.32.3 at /") and engine.lacks == [], engine


def test_collectives_on_device_arrays_issued_together():
    comms = distributed.init_all(DEVICES)
    assert [(c.rank, c.size, c.engine) for c in comms] == [(0, 2, ENGINE), (1, 2, ENGINE)]
    assert all(c.engine_version.startswith(f"{ENGINE} 2.") for c in comms)
    base = np.arange(1001, dtype=np.float32)
    xs = [on(r, base + r) for r in range(2)]
    with distributed.group():
        works = [c.all_reduce(x, op="avg", async_op=True) for c, x in zip(comms, xs)]
    for x, w in zip(xs, works):
        assert w.wait() is x
        np.testing.assert_array_equal(np.array(x.tolist(), dtype=np.float32), base + 0.5)

    parts = [on(r, [r * 10, r * 10 + 1], np.int64) for r in range(2)]
    with distributed.group():
        works = [c.all_gather(p, async_op=True) for c, p in zip(comms, parts)]
    for w in works:
        assert w.wait().tolist() == [[0, 1], [10, 11]]

    flags = [on(r, [r == 0, False], np.bool_) for r in range(2)]
    with distributed.group():
        works = [c.all_reduce(f, op="max", async_op=True) for c, f in zip(comms, flags)]
    assert [w.wait().tolist() for w in works] == [[True, False], [True, False]]


def test_what_a_group_and_the_engines_refuse():
    comms = distributed.init_all(DEVICES)
    x = on(0, [1.0, 2.0])
    with distributed.group():
        with pytest.raises(ValueError, match="async_op=True"):
            comms[0].all_reduce(x)
    with pytest.raises(ValueError, match="backend mismatch in all_reduce"):
        comms[0].all_reduce(np.ones(2, np.float32))
    with pytest.raises(ValueError, match="tag"):
        comms[0].send(x, 1, tag=3)
    with pytest.raises(ValueError, match="MPI communicators only"):
        comms[0].barrier()
    with pytest.raises(ValueError, match="named twice"):
        distributed.init_all([DEVICES[0], DEVICES[0]])
    with pytest.raises(ValueError, match="init_all"):
        distributed.init(ENGINE.lower())
    # The block's own exception passes through; the group still ends.
    with pytest.raises(KeyError):
        with distributed.group():
            raise KeyError("inside")
    with distributed.group():
        works = [c.all_reduce(on(r, [r + 1.0]), async_op=True) for r, c in enumerate(comms)]
    assert [w.wait().tolist() for w in works] == [[3.0], [3.0]]


def test_ranks_made_one_by_one_on_their_own_threads():
    import threading

    uid = distributed.unique_id(DEVICES[0])
    assert isinstance(uid, bytes) and len(uid) == 128
    results, errors = [None, None], []

    def rank(r):
        try:
            comm = distributed.init_rank(DEVICES[r], uid, 2, r)
            assert (comm.rank, comm.size, comm.engine) == (r, 2, ENGINE)
            x = on(r, np.arange(5) * (r + 1))
            comm.all_reduce(x, op="sum")
            results[r] = x.tolist()
        except BaseException as e:  # noqa: BLE001 - reported below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [[0.0, 3.0, 6.0, 9.0, 12.0]] * 2
    with pytest.raises(ValueError, match="128 bytes, not 3"):
        distributed.init_rank(DEVICES[0], b"abc", 2, 0)
    with pytest.raises(ValueError, match="rank 2 of 2"):
        distributed.init_rank(DEVICES[0], uid, 2, 2)
    with pytest.raises(ValueError, match="size must be"):
        distributed.init_rank(DEVICES[0], uid, -1, 0)


def test_ranks_of_one_thread_split_together():
    comms = distributed.init_all(DEVICES)
    new = distributed.split_all(comms, [0, 0], keys=[1, 0])
    assert [(c.rank, c.size, c.engine) for c in new] == [(1, 2, ENGINE), (0, 2, ENGINE)]
    xs = [on(r, [float(r)] * 3) for r in range(2)]
    with distributed.group():
        works = [c.all_reduce(x, op="max", async_op=True) for c, x in zip(new, xs)]
    assert [w.wait().tolist() for w in works] == [[1.0] * 3] * 2
    alone = distributed.split_all(comms, [0, None])
    assert alone[1] is None and (alone[0].rank, alone[0].size) == (0, 1)
    with pytest.raises(ValueError, match="color must be"):
        distributed.split_all(comms, [-1, 0])
    with pytest.raises(ValueError, match="2 colors but 1 keys"):
        distributed.split_all(comms, [0, 0], keys=[0])


ACROSS = """
import sys
import numpy as np
import gpuport
from gpuport import distributed

backend = sys.argv[1]
world = distributed.init()
comm = world.for_device(f"{backend}:{world.rank % 2}")
assert (comm.rank, comm.size) == (world.rank, world.size)
x = gpuport.asarray(np.full(5, world.rank + 1, np.float32)).to(f"{backend}:{world.rank % 2}")
comm.all_reduce(x, op="sum")
want = sum(range(1, world.size + 1))
assert x.tolist() == [want] * 5, x.tolist()
half = comm.split(world.rank % 2, world.rank)
sys.stdout.write(f"rank {world.rank} of {world.size}: {half.size} in my half\\n")  # one write per line
sys.stdout.flush()
"""


@pytest.mark.parametrize("ranks", [2, 3])
def test_one_rank_per_process_from_the_mpi_world(tmp_path, ranks):
    import pathlib
    import subprocess
    import sys

    mpiexec = pathlib.Path(sys.prefix) / "bin" / "mpiexec"
    if not mpiexec.exists():
        pytest.fail(f"no mpiexec in {sys.prefix}: the mpich wheel of tests/python/requirements.txt")
    script = tmp_path / "across.py"
    script.write_text(ACROSS)
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "GPUPORT_MPI_SINGLETON")}
    env["GPUPORT_COLLECTIVE_TIMEOUT"] = "60"
    run = subprocess.run(
        [str(mpiexec), "-n", str(ranks), sys.executable, str(script), BACKEND],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # The launcher may interleave the ranks' output: each rank's line is found wherever it is.
    halves = sorted(re.findall(rf"rank (\d+) of {ranks}: (\d+) in my half", run.stdout))
    want = sorted((str(r), str(len(range(r % 2, ranks, 2)))) for r in range(ranks))
    assert halves == want, run.stdout + run.stderr
