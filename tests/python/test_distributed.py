"""gpuport.distributed: the engines listed with their reasons, and jobs of 2 and 4 ranks
under the `mpich` wheel's mpiexec (distributed_ranks.py holds each rank's checks), the
example, the consistency check, a rank that exits, and MPI missing or wrong."""

import ast
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import gpuport
from gpuport import distributed

HERE = pathlib.Path(__file__).parent
RANKS = HERE / "distributed_ranks.py"
EXAMPLE = HERE.parent.parent / "crates" / "python" / "examples" / "allreduce.py"
# The `mpich` wheel (pinned in requirements.txt) installs its launcher and its standard-ABI
# library into the environment.
MPIEXEC = pathlib.Path(sys.prefix) / "bin" / "mpiexec"
HAS_MPI = MPIEXEC.exists() and (pathlib.Path(sys.prefix) / "lib" / "libmpi_abi.so.1").exists()
requires_mpi = pytest.mark.skipif(not HAS_MPI, reason=f"no mpich wheel in {sys.prefix} (pip install mpich)")
# What makes a process a rank, or names its MPI: the runs below set their own.
LEFT_OUT = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "GPUPORT_MPI_LIBRARY", "GPUPORT_MPI_SINGLETON")


def environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LEFT_OUT}
    # A job whose ranks fall out of step fails in a minute, not after the default ten.
    env.update(GPUPORT_COLLECTIVE_TIMEOUT="60", GPUPORT_EXT="1", **extra)
    return env


def launch(ranks, *args, timeout=300, **extra):
    return subprocess.run(
        [str(MPIEXEC), "-n", str(ranks), sys.executable, *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=environment(**extra),
    )


def in_python(code, **extra):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=environment(**extra))


def rank_lines(run, ranks, mode):
    """Each rank's closing line (the launcher may interleave the ranks' output)."""
    assert run.returncode == 0, run.stdout + run.stderr
    found = sorted(int(r) for r, n in re.findall(rf"rank (\d+) of {ranks}: {mode}: (\d+) checks passed", run.stdout)
                   if int(n) > 0)
    assert found == list(range(ranks)), run.stdout + run.stderr


def test_engines_list_mpi_with_its_version_or_its_reason():
    mpi, nccl, rccl = distributed.engines()
    assert mpi.name == "MPI" and not mpi.available and mpi.version is None
    # pytest is not an MPI rank: the library is found (when the wheel is installed), but the
    # launcher is missing, and the reason says what to do.
    if HAS_MPI:
        assert "MPICH" in mpi.reason and "mpiexec" in mpi.reason, mpi.reason
    else:
        assert "libmpi_abi.so.1" in mpi.reason, mpi.reason
    assert "MPI unavailable" in repr(mpi)
    # NCCL and RCCL are listed, found (their version and where) or not (why).
    assert (nccl.name, rccl.name) == ("NCCL", "RCCL")
    for gpu in (nccl, rccl):
        assert isinstance(gpu.lacks, list), gpu
        if gpu.available:
            assert re.match(rf"{gpu.name} 2\.\d+\.\d+ at /", gpu.version) and gpu.reason is None, gpu
        else:
            assert gpu.version is None and f"no {gpu.name} library loaded" in gpu.reason, gpu.reason


def test_nccl_from_the_wheel_is_found_in_the_environment():
    # The pinned nvidia-nccl-cu13 wheel puts libnccl.so.2 where no loader path names it.
    try:
        wheel = importlib.util.find_spec("nvidia.nccl") is not None
    except ModuleNotFoundError:
        wheel = False
    if "GPUPORT_NCCL_LIBRARY" in os.environ or not wheel:
        pytest.skip("no NCCL wheel here (tests/python/requirements.txt pins one), or another NCCL named")
    nccl = next(e for e in distributed.engines() if e.name == "NCCL")
    assert nccl.available, nccl.reason
    assert re.match(r"NCCL 2\.\d+\.\d+ at .*/site-packages/nvidia/nccl/lib/libnccl\.so\.2", nccl.version), nccl.version
    assert nccl.lacks == [], nccl.lacks


def test_init_without_a_launcher_says_how_to_launch():
    with pytest.raises(gpuport.BackendUnavailable) as e:
        distributed.init()
    assert "mpiexec" in e.value.reason or "libmpi_abi.so.1" in e.value.reason


def test_an_engine_gpuport_does_not_drive_is_a_value_error():
    with pytest.raises(ValueError, match="'mpi'"):
        distributed.init("gloo")


def test_communicators_come_from_init_only():
    for cls in (distributed.Communicator, distributed.Work, distributed.Engine):
        with pytest.raises(TypeError):
            cls()
    assert distributed.Communicator.__module__ == "gpuport.distributed"
    assert gpuport.distributed is distributed


def test_the_stubs_name_everything_public():
    package = pathlib.Path(importlib.util.find_spec("gpuport").origin).parent
    tree = ast.parse((package / "distributed.pyi").read_text())
    named = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert set(distributed.__all__) <= named
    for node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        members = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
        actual = {m for m in dir(getattr(distributed, node.name)) if not m.startswith("_")}
        assert actual - members == set(), node.name


@requires_mpi
def test_a_missing_and_a_wrong_library_give_their_reasons():
    code = ("from gpuport import distributed\n"
            "print(distributed.engines()[0].reason)\n"
            "try:\n    distributed.init()\nexcept Exception as e:\n    print(type(e).__name__, e.reason)\n")
    for library, words in [("/nonexistent/libmpi_abi.so.1", "tried /nonexistent/libmpi_abi.so.1"),
                           ("libm.so.6", "libm.so.6 has no `MPI_Initialized`")]:
        run = in_python(code, GPUPORT_MPI_LIBRARY=library, GPUPORT_MPI_SINGLETON="1")
        assert run.returncode == 0, run.stderr
        listed, raised = run.stdout.splitlines()
        assert words in listed and raised.startswith("BackendUnavailable") and words in raised, run.stdout


@requires_mpi
def test_a_world_of_one_rank_without_a_launcher():
    code = ("import numpy as np\nfrom gpuport import distributed\n"
            "w = distributed.init()\nx = np.arange(5.0)\n"
            "assert (w.rank, w.size, w.engine) == (0, 1, 'MPI'), w\n"
            "assert w.all_reduce(x, op='max') is x and (x == np.arange(5.0)).all()\n"
            "print(w.engine_version)\n")
    run = in_python(code, GPUPORT_MPI_SINGLETON="1")
    assert run.returncode == 0 and "MPICH" in run.stdout, run.stdout + run.stderr


@requires_mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_every_collective_on_every_rank(ranks):
    rank_lines(launch(ranks, RANKS, "collectives"), ranks, "collectives")


@requires_mpi
def test_the_consistency_check_tells_every_rank():
    rank_lines(launch(4, RANKS, "check", GPUPORT_COLLECTIVE_CHECK="1"), 4, "check")


@requires_mpi
def test_the_example_verifies_on_every_rank():
    run = launch(4, EXAMPLE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(re.findall(r"rank (\d) of 4: all_reduce of \d+ float32 on \S+ verified", run.stdout)) == list("0123")


@requires_mpi
def test_a_rank_that_exits_ends_the_job():
    code = ("import os\nimport numpy as np\nfrom gpuport import distributed\n"
            "w = distributed.init()\n"
            "if w.rank == 1:\n    os._exit(3)\n"
            "w.all_reduce(np.ones(4))\n")
    run = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=environment())
    # The launcher ends the job with the rank's status, not a hang.
    assert run.returncode == 3, run.stdout + run.stderr
