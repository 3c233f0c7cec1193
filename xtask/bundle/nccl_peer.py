"""The peer of gpuport's `nccl_allreduce` benchmark: the same all-reduces through PyTorch's
`torch.distributed` (NCCL backend), one process per GPU, under the same `mpiexec` in the
same run (the GPU bundle's run.sh runs both; `xtask bench-nccl-table` puts them side by
side).

Each process takes its rank and the job's size from the launcher (`PMI_RANK`/`PMI_SIZE`,
as MPICH's Hydra sets them; `RANK`/`WORLD_SIZE` otherwise), its GPU by its local rank,
and meets the others over TCP on this machine (`MASTER_ADDR`/`MASTER_PORT`, default
127.0.0.1:29533). Each size (8 B to 1 GiB of float32, summed in place; `GPUPORT_BENCH_MAX_BYTES`
caps it) is measured in rounds of back-to-back `dist.all_reduce` calls between two
barriers, the stream synchronized at the end of each, with as many calls per round as
gpuport's benchmark makes. Rank 0 prints
`torch_allreduce ranks=N bytes=B torch_ns=T torch_busbw_gbs=G` per size. Exits with status
2 when PyTorch, NCCL or a GPU is missing.
"""

import os
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
except Exception as exc:  # noqa: BLE001 - any import failure means "no peer here"
    print(f"nccl_peer: PyTorch is not available: {exc}", file=sys.stderr)
    sys.exit(2)

SIZES = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 128 << 20, 1 << 30]


def env_int(*names, default):
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            return int(value)
    return default


def calls(nbytes):
    """As gpuport's benchmark: about 256 MiB per round, from 4 to 1,000 calls."""
    return max(4, min(1000, (256 << 20) // nbytes))


def bus_gbs(nbytes, ns, ranks):
    factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 1.0
    return nbytes / ns * factor


def main():
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        print("nccl_peer: no CUDA GPU or no NCCL in this PyTorch", file=sys.stderr)
        return 2
    rank = env_int("PMI_RANK", "RANK", default=0)
    size = env_int("PMI_SIZE", "WORLD_SIZE", default=1)
    local = env_int("MPI_LOCALRANKID", "LOCAL_RANK", default=rank)
    rounds = env_int("GPUPORT_BENCH_ROUNDS", default=5)
    max_bytes = env_int("GPUPORT_BENCH_MAX_BYTES", default=1 << 62)
    torch.cuda.set_device(local % torch.cuda.device_count())
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = os.environ.get("MASTER_PORT", "29533")
    options = {"init_method": f"tcp://{address}:{port}", "rank": rank, "world_size": size}
    try:  # binding the GPU at start (PyTorch 2.3 and later) makes NCCL's communicator eagerly
        dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()), **options)
    except TypeError:
        dist.init_process_group("nccl", **options)
    stream = torch.cuda.current_stream()
    if rank == 0:
        print(f"# {size} ranks, torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    for nbytes in (s for s in SIZES if s <= max_bytes):
        n = calls(nbytes)
        x = torch.zeros(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(n):  # one untimed round: connection set-up, first touch
            dist.all_reduce(x)
        stream.synchronize()
        times = []
        for _ in range(rounds):
            dist.barrier()
            start = time.perf_counter_ns()
            for _ in range(n):
                dist.all_reduce(x)
            stream.synchronize()
            times.append((time.perf_counter_ns() - start) / n)
        if rank == 0:
            ns = statistics.median(times)
            print(
                f"torch_allreduce ranks={size} bytes={nbytes} torch_ns={ns:.0f} "
                f"torch_busbw_gbs={bus_gbs(nbytes, ns, size):.2f}",
                flush=True,
            )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
