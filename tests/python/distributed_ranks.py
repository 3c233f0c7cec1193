"""One rank of a gpuport.distributed job: run under `mpiexec -n N python distributed_ranks.py
[collectives|check]` by test_distributed.py, never by pytest itself.

`collectives`: every collective of the Python API on NumPy arrays, gpuport host arrays and
arrays on the ext device, for several dtypes and sizes, in place and out of place, checked
against NumPy's result computed on each rank; then split/dup, point to point with
async_op, and bad input refused on the calling rank. `check`: with
GPUPORT_COLLECTIVE_CHECK=1, ranks that disagree on a collective's size each get an error
naming the disagreement. Each rank prints one line saying how many checks passed; an
assertion that fails exits non-zero, and the launcher ends the job."""

import sys

import numpy as np

import gpuport
from gpuport import distributed as dist

DTYPES = [np.int8, np.uint16, np.int32, np.int64, np.float32, np.float64, np.complex64, np.bool_]
# 0, 1, odd, and past MPICH's eager limit (the large-message protocol).
SIZES = [0, 1, 7, 40_001]
PLACES = ["numpy", "host", "ext"]


def values(rank, n, dtype):
    """Rank `rank`'s input: small integers, exact in every dtype (a product over four ranks
    stays within int8)."""
    base = (np.arange(n) * 7 + rank * 3) % 3 + 1
    if dtype == np.bool_:
        return ((np.arange(n) + rank) % 3 == 0)
    return base.astype(dtype)


def place(a, where):
    """`a` (NumPy) as the operand kind `where` names."""
    if where == "numpy":
        return a.copy()
    if where == "host":
        return gpuport.asarray(a, copy=True)
    return gpuport.asarray(a, device="ext:0")


def host(x):
    """An operand's elements as NumPy (copied back from the ext device)."""
    if isinstance(x, np.ndarray):
        return x
    return np.from_dlpack(x.to("host")).copy()


def reference(op, arrays):
    stack = np.stack(arrays)
    if op == "sum":
        return stack.sum(axis=0, dtype=stack.dtype)
    if op == "prod":
        return stack.prod(axis=0, dtype=stack.dtype)
    if op == "min":
        return stack.min(axis=0)
    return stack.max(axis=0)


def ops_for(dtype):
    if dtype == np.bool_:
        return ["min", "max"]
    if np.issubdtype(dtype, np.complexfloating):
        return ["sum", "prod"]
    return ["sum", "prod", "min", "max"]


class Checks:
    def __init__(self):
        self.passed = 0

    def equal(self, got, want, what):
        got = host(got)
        assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
        assert np.array_equal(got, want), f"{what}: got {got[:8]} want {want[:8]}"
        self.passed += 1

    def raises(self, kind, words, f, what):
        try:
            f()
        except kind as e:
            assert words in str(e), f"{what}: {kind.__name__} without {words!r}: {e}"
            self.passed += 1
            return
        raise AssertionError(f"{what}: no {kind.__name__}")


def collectives(comm, checks):
    r, size = comm.rank, comm.size
    for where in PLACES:
        for dtype in DTYPES:
            for n in SIZES:
                mine = values(r, n, dtype)
                every = [values(q, n, dtype) for q in range(size)]
                tag = f"{where} {np.dtype(dtype).name} n={n}"
                for op in ops_for(dtype):
                    x = place(mine, where)
                    got = comm.all_reduce(x, op=op)
                    assert got is x
                    checks.equal(x, reference(op, every), f"all_reduce {op} in place, {tag}")
                    out = place(np.zeros_like(mine), where)
                    got = comm.all_reduce(place(mine, where), op, out)
                    assert got is out
                    checks.equal(out, reference(op, every), f"all_reduce {op} out of place, {tag}")
                root = size - 1
                x = place(mine, where)
                comm.broadcast(x, root=root)
                checks.equal(x, every[root], f"broadcast, {tag}")
                op = ops_for(dtype)[0]
                x = place(mine, where)
                got = comm.reduce(x, root=root, op=op)
                if r == root:
                    assert got is x
                    checks.equal(x, reference(op, every), f"reduce in place, {tag}")
                else:
                    assert got is None
                    checks.equal(x, mine, f"reduce leaves a non-root's input, {tag}")
                got = comm.all_gather(place(mine, where))
                checks.equal(got, np.stack(every), f"all_gather, {tag}")
                out = place(np.zeros((size * n,), dtype), where)
                assert comm.all_gather(place(mine, where), out) is out
                checks.equal(out, np.concatenate(every), f"all_gather into out, {tag}")
                blocks = [np.concatenate([values(q * size + b, n, dtype) for b in range(size)]) for q in range(size)]
                got = comm.reduce_scatter(place(blocks[r], where), op=op)
                want = reference(op, blocks)[r * n:(r + 1) * n]
                checks.equal(got, want, f"reduce_scatter, {tag}")
                got = comm.all_to_all(place(blocks[r], where))
                want = np.concatenate([blocks[q][r * n:(r + 1) * n] for q in range(size)])
                checks.equal(got, want, f"all_to_all, {tag}")


def groups_and_point_to_point(comm, checks):
    r, size = comm.rank, comm.size
    # A ring: every rank sends to the next and receives from the one before, both queued
    # before either is waited for.
    x = gpuport.asarray(np.full(5, r, np.int32))
    got = np.zeros(5, np.int32)
    sent = comm.send(x, (r + 1) % size, tag=3, async_op=True)
    received = comm.recv(got, (r - 1) % size, tag=3, async_op=True)
    assert received.wait() is got and sent.wait() is None and sent.is_done()
    checks.equal(got, np.full(5, (r - 1) % size, np.int32), "ring of send/recv")
    # Halves by parity, ordered by descending rank; rank 0 joins none.
    sub = comm.split(None if r == 0 else r % 2, key=-r)
    if r == 0:
        assert sub is None
    else:
        members = [q for q in range(1, size) if q % 2 == r % 2]
        assert sub.size == len(members) and sub.rank == sorted(members, reverse=True).index(r)
        checks.equal(sub.all_reduce(np.array([r], np.int64)), np.array([sum(members)], np.int64), "split all_reduce")
    twin = comm.dup()
    assert (twin.rank, twin.size) == (r, size)
    twin.barrier()
    checks.equal(twin.all_reduce(np.ones(3)), np.full(3, float(size)), "dup all_reduce")
    # An async collective's event, waited for by another stream.
    dev = gpuport.device("ext:0")
    a = gpuport.asarray(np.full(4, 1.0), device=dev)
    work = comm.all_reduce(a, async_op=True)
    stream = dev.create_stream()
    stream.wait_event(work.event)
    stream.synchronize()
    assert work.is_done()
    assert work.wait() is a
    checks.equal(a, np.full(4, float(size)), "async all_reduce")


def bad_input(comm, checks):
    size = comm.size
    x = np.ones(4, np.float32)
    checks.raises(ValueError, "root", lambda: comm.broadcast(x, root=size), "a root past the ranks")
    checks.raises(ValueError, "dst", lambda: comm.send(x, size), "a send past the ranks")
    checks.raises(ValueError, "≥ 0", lambda: comm.recv(x, -1), "a negative source")
    checks.raises(ValueError, "elements", lambda: comm.all_gather(x, np.zeros(3, np.float32)), "a small all_gather out")
    checks.raises(ValueError, "not a reduction", lambda: comm.all_reduce(x, op="xor"), "an unknown op")
    checks.raises(ValueError, "MPI has no mean", lambda: comm.all_reduce(x, op="avg"), "avg on MPI")
    checks.raises(ValueError, "float16", lambda: comm.all_reduce(np.ones(2, np.float16)), "a dtype MPI lacks")
    readonly = np.ones(4)
    readonly.flags.writeable = False
    checks.raises(ValueError, "read-only", lambda: comm.all_reduce(readonly), "a read-only NumPy array")
    checks.raises(ValueError, "strided", lambda: comm.all_reduce(np.ones(8)[::2]), "a strided view")
    checks.raises(TypeError, "not list", lambda: comm.all_reduce([1.0, 2.0]), "a list")
    checks.raises(ValueError, "equal", lambda: comm.reduce_scatter(np.ones(size + 1)), "an uneven reduce_scatter")
    checks.raises(ValueError, "tag", lambda: comm.send(x, 0, tag=70_000), "a tag past 65535")
    # Everything above failed before any traffic: the ranks are still in step.
    checks.equal(comm.all_reduce(np.ones(2)), np.full(2, float(size)), "in step after refusals")


def check_mode(comm, checks):
    """Ranks disagreeing on a size: each is told, naming the disagreement."""
    r = comm.rank
    n = 4 if r == 0 else 5
    try:
        comm.all_reduce(np.ones(n))
    except RuntimeError as e:
        assert "disagree" in str(e) and "ranks [0]" in str(e), str(e)
        checks.passed += 1
    else:
        raise AssertionError("the mismatch went through")
    checks.equal(comm.all_reduce(np.ones(3)), np.full(3, float(comm.size)), "agreeing afterwards")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "collectives"
    if not any(b.name == "ext" for b in gpuport.backends()):
        gpuport.register_ext()
    comm = dist.init()
    checks = Checks()
    if mode == "check":
        check_mode(comm, checks)
    else:
        collectives(comm, checks)
        groups_and_point_to_point(comm, checks)
        bad_input(comm, checks)
    comm.barrier()
    print(f"rank {comm.rank} of {comm.size}: {mode}: {checks.passed} checks passed", flush=True)


if __name__ == "__main__":
    main()
