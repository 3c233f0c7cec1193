"""The peer of gpuport's `cuda_bandwidth` benchmark: the same figures through CuPy, on the
same GPU, in the same run (the GPU bundle's run.sh runs both and prints the ratios).

Pinned host->device, device->host and device->device copies at 1 MiB, 16 MiB, 256 MiB and
1 GiB (event-timed on the GPU), event record, stream wait and kernel launch + synchronize
latency (host-timed), strided views read to NumPy (`cupy.asnumpy`, host-timed: a column
of an 8192 x 8192 float32 matrix, every 8th float32 of 64 MiB, the 64 MiB whole), printed
as `RESULT <metric> <value> <unit>` with gpuport's metric names. Exits with status 2 when CuPy or a CUDA GPU is missing.
"""

import statistics
import sys
import time

try:
    import cupy
    from cupy.cuda import runtime
except Exception as exc:  # noqa: BLE001 - any import failure means "no peer here"
    print(f"cupy_peer: CuPy is not available: {exc}", file=sys.stderr)
    sys.exit(2)

SIZES = [(1 << 20, "1MiB"), (16 << 20, "16MiB"), (256 << 20, "256MiB"), (1 << 30, "1GiB")]
FILL = r"""
extern "C" __global__ void fill_u32(unsigned int* p, unsigned int n, unsigned int v) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
"""


def copy_gbps(stream, dst, src, nbytes, kind):
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    runs = max(3, min(30, -(-(2 << 30) // nbytes)))
    runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
    stream.synchronize()
    ms = []
    for _ in range(runs):
        start.record(stream)
        runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
        end.record(stream)
        end.synchronize()
        ms.append(cupy.cuda.get_elapsed_time(start, end))
    return nbytes / (statistics.median(ms) / 1e3) / 1e9


def per_op_us(n, op, settle):
    batches = []
    for _ in range(6):
        t = time.perf_counter()
        for _ in range(n):
            op()
        settle()
        batches.append(time.perf_counter() - t)
    return statistics.median(batches[1:]) * 1e6 / n


def main():
    try:
        cupy.cuda.Device(0).use()
        name = runtime.getDeviceProperties(0)["name"].decode()
    except Exception as exc:  # noqa: BLE001
        print(f"cupy_peer: no CUDA device: {exc}", file=sys.stderr)
        return 2
    print(f"device: cuda:0 ({name}), CuPy {cupy.__version__}")
    stream = cupy.cuda.Stream(non_blocking=True)
    for nbytes, label in SIZES:
        pinned = cupy.cuda.alloc_pinned_memory(nbytes)
        a, b = cupy.cuda.alloc(nbytes), cupy.cuda.alloc(nbytes)
        h2d = copy_gbps(stream, a.ptr, pinned.ptr, nbytes, runtime.memcpyHostToDevice)
        d2h = copy_gbps(stream, pinned.ptr, a.ptr, nbytes, runtime.memcpyDeviceToHost)
        d2d = copy_gbps(stream, b.ptr, a.ptr, nbytes, runtime.memcpyDeviceToDevice)
        print(f"RESULT h2d_{label} {h2d:.2f} GB/s")
        print(f"RESULT d2h_{label} {d2h:.2f} GB/s")
        print(f"RESULT d2d_{label} {d2d:.2f} GB/s")
        del pinned, a, b
    ev = cupy.cuda.Event(block=False, disable_timing=True)
    print(f"RESULT event_record {per_op_us(10_000, lambda: ev.record(stream), stream.synchronize):.3f} us")
    other = cupy.cuda.Stream(non_blocking=True)
    ev.record(stream)
    print(f"RESULT stream_wait {per_op_us(10_000, lambda: other.wait_event(ev), other.synchronize):.3f} us")
    fill = cupy.RawKernel(FILL, "fill_u32")
    out = cupy.zeros(128, dtype=cupy.uint32)
    args = (out, cupy.uint32(128), cupy.uint32(7))

    def launch_sync():
        fill((1,), (128,), args, stream=stream)
        stream.synchronize()

    print(f"RESULT launch_sync {per_op_us(1_000, launch_sync, lambda: None):.3f} us")

    matrix = cupy.zeros((8192, 8192), dtype=cupy.float32)
    line = cupy.zeros(16 << 20, dtype=cupy.float32)
    for metric, view, reps in [
        ("column_read", matrix[:, 17], 20),
        ("every8_read", line[::8], 3),
        ("whole_64MiB_read", line, 3),
    ]:
        print(f"RESULT {metric} {per_op_us(reps, lambda: cupy.asnumpy(view), lambda: None):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
