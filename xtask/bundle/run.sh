#!/usr/bin/env bash
# gpuport GPU bundle: runs every GPU check with the CUDA backend, on a machine with no Rust
# toolchain and no network. `./run.sh LOGDIR` writes one log per part and LOGDIR/summary.txt,
# and exits non-zero if any part failed or could not run (no CUDA GPU, no driver).
# Everything it uses is inside this folder.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
logdir="${1:-}"
if [ -z "$logdir" ]; then
  echo "usage: $0 LOGDIR" >&2
  exit 2
fi
mkdir -p "$logdir" || exit 2
logdir="$(cd "$logdir" && pwd)"
summary="$logdir/summary.txt"
bin="$here/bin"

unset GPUPORT_BACKENDS GPUPORT_DEVICE
export RUST_BACKTRACE=1 GPUPORT_CONFORMANCE_BACKENDS=cuda

# NVRTC for the kernels compiled from source (cuda-gpu, python): gpuport finds the CUDA
# toolkit's itself; where the machine has none, the one its Python environment carries
# (PyTorch's and CuPy's nvidia-cuda-nvrtc wheels) is named. Without any, those tests say
# "skipped: no NVRTC" in their logs.
if [ -z "${GPUPORT_NVRTC_LIBRARY:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so.1[23] >/dev/null 2>&1; then
  nvrtc_py="${GPUPORT_BUNDLE_PYTHON:-$(command -v python3 || true)}"
  if [ -n "$nvrtc_py" ]; then
    nvrtc="$("$nvrtc_py" -c 'import glob, site
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for f in sorted(glob.glob(d + "/nvidia/*/lib/libnvrtc.so.1[23]"), reverse=True):
        print(f); raise SystemExit' 2>/dev/null || true)"
    [ -z "$nvrtc" ] || export GPUPORT_NVRTC_LIBRARY="$nvrtc"
  fi
fi

# --- the machine -------------------------------------------------------------------------
gpu="none found"; driver="unknown"; cuda="unknown"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$logdir/nvidia-smi.log" 2>&1
  gpu="$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | paste -sd ';' -)"
  driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  cuda="$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$logdir/nvidia-smi.log" | head -1)"
  [ -n "$gpu" ] || gpu="none found"
fi
{
  echo "gpuport GPU bundle $(cat "$here/VERSION" 2>/dev/null)"
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(uname -n) ($(uname -srm))"
  echo "GPU:     ${gpu:-none found}"
  echo "driver:  ${driver:-unknown}"
  echo "CUDA:    ${cuda:-unknown}"
  echo
} >"$summary"

status=0
# Time limits, in seconds: one part (a hung driver call must not stall the run) and the
# whole run (a machine booked for a fixed time; parts left when it is spent are skipped,
# which fails the run). The slow parts (compute-sanitizer) come last.
part_limit="${GPUPORT_BUNDLE_PART_TIMEOUT:-900}"
run_limit="${GPUPORT_BUNDLE_TIME_LIMIT:-0}"
started=$(date +%s)
# part_time: the seconds the next part may take (0 when the run's time is spent).
part_time() {
  local left="$part_limit"
  if [ "$run_limit" -gt 0 ]; then
    left=$(( run_limit - ($(date +%s) - started) ))
    [ "$left" -le "$part_limit" ] || left="$part_limit"
    [ "$left" -gt 0 ] || left=0
  fi
  echo "$left"
}
# run_part NAME COMMAND...: runs COMMAND with its output in LOGDIR/NAME.log, then adds a
# line to the summary from libtest's `test result:` lines (or the exit code alone). With
# `log_check=FUNCTION` set, a run that exited 0 fails too when `FUNCTION LOG` does (what it
# prints says why).
run_part() {
  local name="$1"; shift
  local log="$logdir/$name.log"
  local limit; limit=$(part_time)
  if [ "$limit" -le 0 ]; then
    skip_part "$name" "the run's time limit (GPUPORT_BUNDLE_TIME_LIMIT=${run_limit}s) was spent"
    return
  fi
  echo "== $name: $*" | tee -a "$logdir/run.log"
  ( cd "$here" && timeout -k 10 "$limit" "$@" ) >"$log" 2>&1
  local rc=$?
  local complaint=""
  if [ "$rc" -eq 0 ] && [ -n "${log_check:-}" ]; then
    complaint=$("$log_check" "$log") || rc=1
  fi
  local passed failed ignored
  passed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) passed.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  failed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) failed.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  ignored=$(sed -n 's/^test result: .* \([0-9][0-9]*\) ignored.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  local result="PASS"
  [ "$rc" -eq 0 ] || result="FAIL"
  local why=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=1
    result="TIMEOUT"
    # libtest names a test before running it (one thread): the last one started hung.
    why="stopped after ${limit}s; last started: $(grep -E '^test .* \.\.\. *$' "$log" | tail -1)"
  elif [ "$rc" -ne 0 ]; then
    status=1
    # An unavailable backend or device says why; name it in the summary.
    why=$(grep -m1 -o -E "cuda: (no device|runtime library not found|required symbol|driver version)[^\"]*" "$log" || true)
    [ -n "$why" ] || why=$(grep -m1 -o -i -E "(CuPy is not available|PyTorch is not available|no CUDA device)[^\"]*" "$log" || true)
    if [ -n "$complaint" ]; then
      why="$complaint"
    elif [ -n "$why" ]; then
      result="UNAVAILABLE"
    else
      why=$(grep -m1 -E "panicked at|FAILED|error" "$log" || true)
    fi
  fi
  printf '%-22s %-11s passed=%-4s failed=%-4s ignored=%-4s exit=%s\n' "$name" "$result" "$passed" "$failed" "$ignored" "$rc" >>"$summary"
  [ -z "$why" ] || printf '    %s\n' "$why" >>"$summary"
  [ "$result" != "PASS" ] || [ -z "$complaint" ] || printf '    %s\n' "$complaint" >>"$summary"
  if [ "$result" = "PASS" ] && [ "$passed" -eq 0 ] && grep -q '^test result:' "$log"; then
    printf '    (ran no test)\n' >>"$summary"
  fi
}

# only_provoked_api_errors LOG: whether memcheck's errors in LOG are only the failed driver
# calls the conformance suite makes on purpose — an event's elapsed time asked while it is
# pending (CUDA_ERROR_NOT_READY) or of an event without timing (CUDA_ERROR_INVALID_HANDLE),
# a module image that is not one (CUDA_ERROR_INVALID_IMAGE), a kernel name the module
# lacks (CUDA_ERROR_NOT_FOUND) — each checked by its case. Anything else (a memory error,
# a leak, another failed call) fails the part, as does a missing error summary.
only_provoked_api_errors() {
  local total provoked
  if ! grep -q '^test result: ok\.' "$1" || grep -q '^test result: FAILED' "$1"; then
    echo "the suite did not pass under memcheck"
    return 1
  fi
  total=$(sed -n 's/.*========= ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' "$1" | tail -1)
  if [ -z "$total" ]; then
    echo "memcheck printed no error summary"
    return 1
  fi
  provoked=$(grep -c -E '========= Program hit (CUDA_ERROR_NOT_READY .* cuEventElapsedTime|CUDA_ERROR_INVALID_HANDLE .* cuEventElapsedTime|CUDA_ERROR_INVALID_IMAGE .* cuModuleLoadData|CUDA_ERROR_NOT_FOUND .* cuModuleGetFunction)' "$1")
  if [ "$total" -ne "$provoked" ]; then
    echo "memcheck reported $total errors, of which $provoked were provoked on purpose"
    return 1
  fi
  echo "memcheck reported only the $provoked failed calls the suite makes on purpose"
}

# skip_part NAME WHY: a part that cannot run here, said so (and failing the run).
skip_part() {
  printf '%-22s %-11s %s\n' "$1" "SKIPPED" "$2" >>"$summary"
  status=1
}

# --- the parts ---------------------------------------------------------------------------
# Discovery and the demo pipeline on cuda:0 (event-timed figures in its log).
run_part demo env GPUPORT_DEVICE=cuda:0 "$bin/demo"
# The whole conformance suite on `cuda`: a case skipped for lack of hardware is listed.
run_part conformance "$bin/conformance" --test-threads=1
# CUDA-only tests: unit tests, loading, GPU behaviour (default streams, managed memory, …).
run_part cuda-unit "$bin/cuda-unit" --include-ignored
run_part cuda-loading "$bin/cuda-loading" --include-ignored
run_part cuda-gpu "$bin/cuda-gpu" --include-ignored --test-threads=1
# DLPack export/import, including the cuda:0 ↔ CPU cells of the cross-device matrix.
run_part dlpack-exchange "$bin/dlpack-exchange" --test-threads=1
# DLPack and the CUDA Array Interface on CUDA arrays (every memory kind, the stream
# handshake with a slow producer); the CUDA <-> ROCm test needs both vendors' devices.
run_part dlpack-devices env GPUPORT_CONFORMANCE_BACKENDS=cuda "$bin/dlpack-devices" --include-ignored \
  --skip cuda_and_rocm_exchange_through_the_copy_engine
run_part cai-devices env GPUPORT_CONFORMANCE_BACKENDS=cuda "$bin/cai-devices" --include-ignored --test-threads=1
# Strided views of GPU memory through the copy kernels (compiled with NVRTC at first use),
# checked against a host model; the 2D-copy route beside them.
run_part copy-kernels "$bin/copy-kernels" --include-ignored
# The installed driver library: every required symbol through cuGetProcAddress.
libcuda="$(ldconfig -p 2>/dev/null | sed -n 's/.*libcuda\.so\.1 (.*x86-64.*) => //p' | head -1)"
if [ -n "$libcuda" ] && [ "$cuda" != "unknown" ] && [ -n "$cuda" ]; then
  major="${cuda%%.*}"; minor="${cuda#*.}"; minor="${minor%%.*}"
  run_part cuda-real-driver env GPUPORT_REAL_LIBCUDA="$libcuda" GPUPORT_REAL_LIBCUDA_VERSION="$((major * 1000 + minor * 10))" \
    "$bin/cuda-real-driver" --ignored every_required_symbol
else
  skip_part cuda-real-driver "no libcuda.so.1 in the loader's cache, or nvidia-smi did not give the CUDA version"
fi
# The Python module: the wheel installed (no network, no dependencies) into a scratch
# folder, then tests/python with pytest: NumPy/JAX/tvm-ffi where installed, and the GPU
# peers (CuPy, PyTorch, Numba, cuda.core). GPUPORT_BUNDLE_PYTHON picks the interpreter.
py="${GPUPORT_BUNDLE_PYTHON:-$(command -v python3 || true)}"
if [ -z "$py" ]; then
  skip_part python "no python3 here"
elif ! "$py" -c "import pytest, numpy" >/dev/null 2>&1; then
  skip_part python "$py has no pytest or numpy"
else
  site="$(mktemp -d "${TMPDIR:-/tmp}/gpuport-site.XXXXXX")"
  limit=$(part_time)
  if [ "$limit" -le 0 ]; then
    skip_part python "the run's time limit (GPUPORT_BUNDLE_TIME_LIMIT=${run_limit}s) was spent"
  elif "$py" -m pip install --no-index --no-deps --find-links "$here/python" --target "$site" gpuport >"$logdir/python-install.log" 2>&1; then
    log="$logdir/python.log"
    echo "== python: $py -m pytest tests/python" | tee -a "$logdir/run.log"
    # Where nvidia-smi sees a GPU, the GPU tests must run rather than skip.
    require=0; [ "$gpu" = "none found" ] || require=1
    # The tests on vendor arrays (test_vendor_devices.py) run for the backend
    # GPUPORT_CONFORMANCE_BACKENDS names, which must then be available: named only where
    # there is a GPU.
    vendor=""; [ "$require" -eq 0 ] || vendor=cuda
    ( cd "$here" && GPUPORT_REQUIRE_CUDA=$require GPUPORT_CONFORMANCE_BACKENDS=$vendor PYTHONPATH="$site" \
        timeout -k 10 "$limit" "$py" -m pytest -q -rs -p no:cacheprovider tests/python ) >"$log" 2>&1
    rc=$?
    count() { tail -n 3 "$log" | grep -o -E "[0-9]+ $1" | head -1 | grep -o -E "^[0-9]+" || echo 0; }
    result=PASS
    [ "$rc" -eq 0 ] || { result=FAIL; status=1; }
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || result=TIMEOUT
    printf '%-22s %-11s passed=%-4s failed=%-4s skipped=%-4s exit=%s\n' python "$result" \
      "$(count passed)" "$(count failed)" "$(count skipped)" "$rc" >>"$summary"
    [ "$rc" -eq 0 ] || printf '    %s\n' "$(grep -m1 -E '^(FAILED|ERROR)' "$log")" >>"$summary"
  else
    skip_part python "pip could not install the wheel (python-install.log)"
  fi
  rm -rf "$site"
fi

mpi_py="${GPUPORT_BUNDLE_PYTHON:-$(command -v python3 || true)}"

# NCCL as this machine's Python has it (the nvidia-nccl wheel PyTorch brings): gpuport's
# loader finds it, reads its version and resolves every call that version has.
nccl_lib=""
if [ -n "$mpi_py" ]; then
  nccl_lib="$("$mpi_py" -c '
import importlib.util, pathlib
try:
    spec = importlib.util.find_spec("nvidia.nccl")
except ModuleNotFoundError:
    spec = None
for d in (spec.submodule_search_locations or []) if spec else []:
    lib = pathlib.Path(d) / "lib" / "libnccl.so.2"
    if lib.is_file():
        print(lib)
        break
' 2>/dev/null || true)"
fi

# The collectives with several ranks: the mpich wheel (mpi/) installed with pip into a
# scratch prefix for its launcher and its MPI standard-ABI library; the multi-rank tests
# (cuda:0's arrays, staged through pinned memory, among the host's and ext's) with 2 and 4
# ranks, then all_reduce beside MPI_Allreduce_c called directly with 2 and 4 ranks.
mpi_prefix="$(mktemp -d "${TMPDIR:-/tmp}/gpuport-mpi.XXXXXX")"
if [ -z "$mpi_py" ]; then
  skip_part collectives "no python3 here (pip installs the mpich wheel)"
elif ! "$mpi_py" -m pip install --quiet --ignore-installed --no-index --no-deps --no-warn-script-location \
    --prefix "$mpi_prefix" "$here"/mpi/mpich-*.whl >"$logdir/mpich-install.log" 2>&1 || [ ! -x "$mpi_prefix/bin/mpiexec" ]; then
  skip_part collectives "the mpich wheel did not install (mpich-install.log)"
else
  mpilib="$mpi_prefix/lib/libmpi_abi.so.1"
  for n in 2 4; do
    run_part "collectives-$n" env GPUPORT_MPI_LIBRARY="$mpilib" "$mpi_prefix/bin/mpiexec" -n "$n" \
      "$bin/collective-ranks" --include-ignored --test-threads=1
  done
  # NCCL with one rank per process, one process per GPU: MPI's world made into an NCCL
  # communicator (the unique id over MPI), every collective across the processes.
  if [ -n "$nccl_lib" ]; then
    gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
    gpus="${gpus:-1}"; [ "$gpus" -ge 1 ] 2>/dev/null || gpus=1
    run_part "nccl-processes-$gpus" env GPUPORT_MPI_LIBRARY="$mpilib" GPUPORT_NCCL_LIBRARY="$nccl_lib" \
      GPUPORT_CONFORMANCE_BACKENDS=cuda "$mpi_prefix/bin/mpiexec" -n "$gpus" \
      "$bin/collective-nccl-processes" --include-ignored --test-threads=1
    # all_reduce from 8 B to 1 GiB: gpuport beside ncclAllReduce called directly, then
    # PyTorch's torch.distributed (NCCL backend) on the same GPUs, and the two side by side.
    run_part "bench-nccl-$gpus" env GPUPORT_MPI_LIBRARY="$mpilib" GPUPORT_NCCL_LIBRARY="$nccl_lib" \
      "$mpi_prefix/bin/mpiexec" -n "$gpus" "$bin/bench-nccl-allreduce"
    run_part "bench-nccl-torch-$gpus" "$mpi_prefix/bin/mpiexec" -n "$gpus" "$mpi_py" "$here/bench/nccl_peer.py"
    if "$bin/xtask" bench-nccl-table "$logdir/bench-nccl-$gpus.log" "$logdir/bench-nccl-torch-$gpus.log" \
        >"$logdir/bench-nccl-table.md" 2>&1; then
      { echo; echo "NCCL all_reduce: gpuport, ncclAllReduce directly, torch.distributed ($gpus GPUs)"; cat "$logdir/bench-nccl-table.md"; } >>"$summary"
    else
      skip_part bench-nccl-table "$(cat "$logdir/bench-nccl-table.md")"
    fi
  else
    skip_part nccl-processes "no nvidia-nccl wheel in ${mpi_py:-python3}'s environment"
  fi
  for n in 2 4; do
    run_part "bench-collectives-$n" env GPUPORT_MPI_LIBRARY="$mpilib" "$mpi_prefix/bin/mpiexec" -n "$n" "$bin/bench-allreduce"
  done
  if "$bin/xtask" bench-collectives-table "$logdir/bench-collectives-2.log" "$logdir/bench-collectives-4.log" \
      >"$logdir/bench-collectives-table.md" 2>&1; then
    { echo; echo "all_reduce beside MPI_Allreduce_c called directly (host memory, 2 and 4 ranks)"; cat "$logdir/bench-collectives-table.md"; } >>"$summary"
  else
    skip_part bench-collectives-table "$(cat "$logdir/bench-collectives-table.md")"
  fi
fi
rm -rf "$mpi_prefix"

if [ -n "$nccl_lib" ]; then
  run_part nccl-loader env GPUPORT_NCCL_LIBRARY="$nccl_lib" "$bin/collective-real-engines" --ignored --exact \
    nccl_is_found_read_and_lacks_only_what_its_version_lacks --nocapture
  # A communicator of one rank on cuda:0 over that NCCL: every collective, a message to
  # itself, the order behind a held stream, arrays dropped under a waiting collective.
  run_part nccl-one-rank env GPUPORT_NCCL_LIBRARY="$nccl_lib" GPUPORT_CONFORMANCE_BACKENDS=cuda \
    "$bin/collective-nccl-one-rank" --ignored --nocapture
else
  skip_part nccl-loader "no nvidia-nccl wheel (nvidia/nccl/lib/libnccl.so.2) in ${mpi_py:-python3}'s environment"
  skip_part nccl-one-rank "no nvidia-nccl wheel in ${mpi_py:-python3}'s environment"
fi

# Benchmarks (ratios against floors measured in the same run; they assert nothing).
run_part bench-staged-copy "$bin/bench-staged-copy"
# CUDA bandwidth and latency through gpuport, and the same through CuPy in the same run.
run_part bench-cuda "$bin/bench-cuda"
python="$(command -v python3 || true)"
if [ -z "$python" ]; then
  skip_part bench-cupy "no python3 here"
else
  run_part bench-cupy "$python" "$here/bench/cupy_peer.py"
fi
# Kernels compiled from source: gpuport's RawModule beside CuPy's (the wheel installed
# into a scratch folder, as for the Python tests).
if [ -z "$python" ]; then
  skip_part bench-compile "no python3 here"
else
  compile_site="$(mktemp -d "${TMPDIR:-/tmp}/gpuport-site.XXXXXX")"
  if "$python" -m pip install --no-index --no-deps --find-links "$here/python" --target "$compile_site" gpuport >/dev/null 2>&1; then
    run_part bench-compile env PYTHONPATH="$compile_site" "$python" "$here/bench/compile_peer.py"
    if grep -q '^RESULT ' "$logdir/bench-compile.log" 2>/dev/null; then
      { echo; echo "kernels compiled from source: gpuport | CuPy (same GPU, same run)"; grep '^RESULT ' "$logdir/bench-compile.log"; } >>"$summary"
    fi
  else
    skip_part bench-compile "pip could not install the wheel"
  fi
  rm -rf "$compile_site"
fi
if grep -q '^RESULT ' "$logdir/bench-cuda.log" 2>/dev/null && grep -q '^RESULT ' "$logdir/bench-cupy.log" 2>/dev/null; then
  {
    echo "gpuport vs CuPy, same GPU, same run (bandwidth: higher is better; latency: lower is better)"
    printf '%-16s %12s %12s %8s\n' metric gpuport cupy ratio
    awk 'FNR == NR && $1 == "RESULT" { peer[$2] = $3; next }
         $1 == "RESULT" && ($2 in peer) && peer[$2] > 0 {
           printf "%-16s %10.3f %s %10.3f %s %7.2fx\n", $2, $3, $4, peer[$2], $4, $3 / peer[$2] }' \
      "$logdir/bench-cupy.log" "$logdir/bench-cuda.log"
  } >"$logdir/bench-ratios.txt"
  { echo; cat "$logdir/bench-ratios.txt"; } >>"$summary"
fi
# The plugin boundary's figures (`cargo xtask bench`'s plugin rows): the ext device linked
# in against the same device loaded through the plugin ABI, in the same run, in both thread
# placements (`free`, and `one-core`: every thread on CPU 0); GPUPORT_BENCH_ROUNDS rounds
# each (3 unless set; GPUPORT_BENCH_QUICK=1 asks criterion for its quick mode, a smoke run).
# No GPU is used: these are host figures, measured here because this machine is quieter
# and larger than the development machines.
rounds="${GPUPORT_BENCH_ROUNDS:-3}"
quick=(); [ "${GPUPORT_BENCH_QUICK:-0}" != 1 ] || quick=(--quick)
for placement in free one-core; do
  workers=(-u GPUPORT_WORKER_CPUS); [ "$placement" = free ] || workers=(GPUPORT_WORKER_CPUS=0)
  run_part "bench-plugin-$placement" env "${workers[@]}" GPUPORT_BENCH_PLACEMENT="$placement" GPUPORT_BENCH_ROUNDS="$rounds" \
    CRITERION_HOME="$logdir/criterion-$placement" "$bin/bench-hal" --bench "${quick[@]}" plugin_
done
if "$bin/xtask" bench-table --prefix plugin_ free="$logdir/criterion-free" one-core="$logdir/criterion-one-core" \
    >"$logdir/bench-plugin-table.md" 2>&1; then
  { echo; echo "the plugin boundary (ratios: ext as a plugin / linked in; the median round of $rounds)"; cat "$logdir/bench-plugin-table.md"; } >>"$summary"
else
  skip_part bench-plugin-table "$(cat "$logdir/bench-plugin-table.md")"
fi
# Memory and race checks of the CUDA-only tests, where the machine has compute-sanitizer.
if ! command -v compute-sanitizer >/dev/null 2>&1; then
  skip_part sanitizer "compute-sanitizer is not installed here"
elif [ "$gpu" = "none found" ]; then
  skip_part sanitizer "no CUDA GPU"
else
  # The legacy-stream test is left out: it holds a blocking stream and checks that work
  # on a non-blocking stream still runs meanwhile, and these tools serialise memsets —
  # measured on an H100 under memcheck and synccheck, a memset queued behind a held
  # stream made another stream's memset wait for it — so under them the test waits for
  # its own held stream, in every run. It runs without the tools (part `cuda-gpu`).
  for tool in memcheck racecheck synccheck; do
    run_part "sanitizer-$tool" compute-sanitizer --tool "$tool" --error-exitcode 1 \
      "$bin/cuda-gpu" --include-ignored --test-threads=1 --skip legacy_default_stream_waits_for_blocking_streams_only
  done
  # The validation checks the driver doubles make in CI, on the real driver: the whole
  # conformance suite under memcheck with the leak check (allocations alive at exit).
  log_check=only_provoked_api_errors run_part sanitizer-conformance \
    compute-sanitizer --tool memcheck --leak-check full "$bin/conformance" --test-threads=1
fi
echo >>"$summary"
if [ "$status" -eq 0 ]; then echo "overall: PASS" >>"$summary"; else echo "overall: FAIL (see the parts above)" >>"$summary"; fi
cat "$summary"
exit "$status"
