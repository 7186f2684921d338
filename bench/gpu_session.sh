#!/usr/bin/env bash
# One session on a lent GPU machine (issue 32), in one call: install, the GPU's fused loop
# against the CPU's, benchmarks, the default and the paper sweep on CPU and CUDA compared with
# compare_runs, and the whole suite.
#
# Run from the repository root of a copy of the working tree on the GPU machine, with the
# Python 3.12 wheels attnsvm needs (and the image lacks) in .whl/ and the commit sent in
# .commit_sent (both made on the developer's machine, bench/README.md "GPU"). Everything it
# measures lands under $OUT (default /tmp/gpu_out): log.txt, and results.tgz with the
# benchmark tables, compare_runs outputs, the suite's junit XML and the sweeps' logs.
# Stages are time-boxed so that the whole call ends inside BUDGET seconds (default 570).
set -u
T0=$(date +%s)
BUDGET=${BUDGET:-570}
OUT=${OUT:-/tmp/gpu_out}
W=$OUT/w
mkdir -p "$W/tables"
REPO=$(pwd)
exec > >(tee "$OUT/log.txt") 2>&1
now() { echo $(($(date +%s) - T0)); }
log() { echo "[$(now)s] $*"; }
left() { echo $((BUDGET - $(now))); }
export PYTHONUNBUFFERED=1 ATTNSVM_BENCH_TABLES=$W/tables OMP_NUM_THREADS=1
ATTNSVM_BENCH_COMMIT=$(cat .commit_sent 2>/dev/null || echo unknown)
export ATTNSVM_BENCH_COMMIT ATTNSVM_CACHE=/tmp/attnsvm-cache

log "0. machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
    --format=csv
nproc
free -g | head -2
uptime
python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl 2>&1 | tail -2
if ! python3 -c "import cvxpy, zarr, snakemake, pydantic, netCDF4" 2>/dev/null; then
    log "the image's environment took no wheels: installing into /tmp/site"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2 ||
    export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
python3 bench/gpu_check.py versions

log "1. the GPU's fused loop against the CPU's (the suite tests it again)"
timeout 90 python3 bench/gpu_check.py fused

log "2. benchmarks (quiet machine)"
timeout 140 python3 bench/bench_train_devices.py --routes cpu,cpu-fused,cuda,cuda-fused \
    --sizes 64,256,1024,4096,16384,65536 --large-sizes 64,256,1024,4096,16384 \
    --iterations 2000 --max-seconds 4 --max-gib 4 --repeat 2 2>&1 | tail -25
timeout 60 python3 bench/bench_svm_batched.py --device cuda --repeat 2 \
    --batches 256,1024,4096,16384 --large-batches 64,256,1024 2>&1 | tail -14

log "3. sweeps (CPU and CUDA, torch loop and fused loop) and the whole suite, in parallel"
sweep() { # name configfile device fused cores
    local dir=/tmp/run_$1
    mkdir -p "$dir" && tar -C "$REPO" --exclude=./.whl -cf - . | tar -C "$dir" -xf -
    (cd "$dir" && ATTNSVM_FUSED=$4 timeout $(($(left) - 60)) python3 -m snakemake \
        --cores "$5" --configfile "$2" --config results="$W/res_$1" device="$3" \
        >"$W/sweep_$1.log" 2>&1
    echo "sweep $1 rc=$? at $(now)s" >>"$W/sweeps.txt")
}
sweep default_cpu config/config.yaml cpu 0 3 &
sweep default_cuda config/config.yaml cuda 0 3 &
sweep paper_cpu config/paper.yaml cpu 0 2 &
sweep paper_cuda config/paper.yaml cuda 0 2 &
sweep paper_cpu_fused config/paper.yaml cpu 1 1 &
sweep paper_cuda_fused config/paper.yaml cuda 1 1 &
# the longest files first, so that the workers finish together (durations of a 2-core run)
first="workflow resume integrity derived limits beyond svm_nuclear_size extending claims"
files=$(for f in $first; do echo "tests/test_$f.py"; done)
files="$files $(ls tests/test_*.py | grep -v -E "test_($(echo "$first" | tr ' ' '|'))\.py")"
timeout $(($(left) - 40)) python3 -m pytest -n 10 -q -m "not slurm" -p no:cacheprovider \
    -rfE --deselect tests/test_workflow.py::test_lint_format_and_style --durations=15 \
    --junitxml="$W/junit_suite.xml" $files >"$W/suite.log" 2>&1
echo "suite rc=$? at $(now)s" | tee -a "$W/suite.log"
tail -45 "$W/suite.log"
wait
cat "$W/sweeps.txt"

log "4. compare_runs"
cmp() { # a b label args...
    local a=$1 b=$2 label=$3
    shift 3
    echo "== $label $*"
    python3 bench/compare_runs.py "$W/res_$a" "$W/res_$b" "$@" 2>&1 | tail -40
}
{
    cmp default_cpu default_cuda "default: CPU vs CUDA, torch loop, bit for bit"
    cmp default_cpu default_cuda "default: CPU vs CUDA, torch loop" --rtol 1e-6 --atol 1e-9
    cmp paper_cpu paper_cuda "paper: CPU vs CUDA, torch loop, bit for bit"
    cmp paper_cpu paper_cuda "paper: CPU vs CUDA, torch loop" --rtol 1e-6 --atol 1e-9
    cmp paper_cpu_fused paper_cuda_fused "paper: CPU vs CUDA, fused loop, bit for bit"
    cmp paper_cpu_fused paper_cuda_fused "paper: CPU vs CUDA, fused loop" --rtol 1e-15
} >"$W/compare.txt" 2>&1
grep -E "^==|compared" "$W/compare.txt"
timeout 30 python3 bench/gpu_check.py status "$W" | tee "$W/status.txt"

log "5. pack"
tar -C "$OUT" -czf "$OUT/results.tgz" w
ls -la "$OUT"
log "done"
