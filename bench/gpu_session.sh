#!/usr/bin/env bash
# The GPU checks of issue 32 on a lent GPU machine, in stages:
#
#   bash bench/gpu_session.sh setup benches tests     # first call (about 8 minutes)
#   bash bench/gpu_session.sh setup sweeps            # second call, at once, while warm
#
# setup: install the wheels of .whl/ and attnsvm (skipped when already done on this machine),
#        print the versions, check the GPU's fused loop against the CPU's bit for bit;
# benches: bench_train_devices (CPU and GPU routes) and bench_svm_batched on CUDA, quiet machine;
# tests: the whole suite (-m "not slurm": no SLURM cluster there; the lint test: no ruff there),
#        14 workers, every test's outcome logged as it ends (-v), so a cut-off run still names
#        its failures;
# sweeps: config/paper.yaml and config/config.yaml on the CPU and on CUDA, each pair compared
#        by compare_runs (bit for bit, then within a tolerance), the cell status counts.
#
# Run from the repository root of a copy of the working tree, with the Python 3.12 wheels the
# image lacks in .whl/ and the commit sent in .commit_sent (bench/README.md, "GPU"). Work
# stays in $WORK (default /tmp/gpu_work; a warm machine keeps it between calls); each stage
# packs what it measured into $OUT/<stage>.tgz (the device tool returns at most 8 files) and
# prints a summary. Each stage is time-boxed (seconds: SETUP, BENCHES, TESTS, SWEEPS).
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/gpu_out}
WORK=${WORK:-/tmp/gpu_work}
REPO=$(pwd)
mkdir -p "$OUT" "$WORK"
now() { echo $(($(date +%s) - T0)); }
log() { echo "[$(now)s] $*"; }
pack() { tar -C "$WORK" -czf "$OUT/$1.tgz" "$1" && log "packed $OUT/$1.tgz"; }
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 ATTNSVM_CACHE=$WORK/cache
ATTNSVM_BENCH_COMMIT=$(cat .commit_sent 2>/dev/null || echo unknown)
export ATTNSVM_BENCH_COMMIT
use_site() { # where the image's environment took no wheels, they went to $WORK/site
    if [ -d "$WORK/site" ] && [[ ":${PYTHONPATH:-}:" != *":$WORK/site:"* ]]; then
        export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH} PATH=$WORK/site/bin:$PATH
    fi
}

setup() {
    local W=$WORK/setup
    mkdir -p "$W"
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
            --format=csv
        grep -m1 "model name" /proc/cpuinfo
        echo "cores: $(getconf _NPROCESSORS_ONLN)"
        free -g | head -2
        uptime
        echo "commit $ATTNSVM_BENCH_COMMIT"
        if [ ! -e "$WORK/installed" ]; then
            python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl 2>&1 | tail -2
            if ! python3 -c "import cvxpy, zarr, snakemake, pydantic, netCDF4" 2>/dev/null; then
                echo "the image's environment took no wheels: installing into $WORK/site"
                python3 -m pip install -q --no-index --no-deps --no-compile \
                    --target "$WORK/site" .whl/*.whl
                use_site
            fi
            python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 |
                tail -2
            touch "$WORK/installed"
        fi
        timeout "${SETUP:-120}" python3 bench/gpu_check.py versions
        timeout "${SETUP:-120}" python3 bench/gpu_check.py fused
    } 2>&1 | tee "$W/setup.log"
    pack setup
}

benches() {
    local W=$WORK/benches
    mkdir -p "$W/tables"
    {
        ATTNSVM_BENCH_TABLES=$W/tables timeout "${BENCHES:-150}" python3 \
            bench/bench_train_devices.py --routes cpu,cpu-fused,cuda,cuda-fused \
            --sizes 64,256,1024,4096,16384,65536 --large-sizes 64,256,1024,4096,16384 \
            --iterations 2000 --max-seconds 4 --max-gib 4 --repeat 2
        ATTNSVM_BENCH_TABLES=$W/tables timeout 80 python3 bench/bench_svm_batched.py \
            --device cuda --repeat 2 --batches 256,1024,4096,16384 --large-batches 64,256,1024
    } 2>&1 | tee "$W/benches.log" | grep -E "^\||wrote|Error|error"
    pack benches
}

tests() {
    local W=$WORK/tests
    mkdir -p "$W"
    # the longest files first, so that the workers end together (durations of a 2-core run)
    local first="workflow resume integrity derived limits beyond svm_nuclear_size extending"
    local files
    files="$(for f in $first; do echo "tests/test_$f.py"; done)"
    files="$files $(ls tests/test_*.py | grep -v -E "test_($(echo "$first" | tr ' ' '|'))\.py")"
    # shellcheck disable=SC2086
    timeout "${TESTS:-330}" python3 -m pytest -n 14 -v -m "not slurm" -p no:cacheprovider \
        -p no:benchmark --tb=short -rfE --durations=20 \
        --deselect tests/test_workflow.py::test_lint_format_and_style \
        --junitxml="$W/junit.xml" $files >"$W/suite.log" 2>&1
    echo "suite rc=$? at $(now)s" | tee -a "$W/suite.log"
    grep -E "(FAILED|ERROR) tests/" "$W/suite.log" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' |
        sort -u | tee "$W/failed.txt"
    grep -E "^[0-9]+ (passed|failed)|passed|timeout" "$W/suite.log" | tail -3
    echo "outcomes: $(grep -c -E " PASSED " "$W/suite.log") passed," \
        "$(grep -c -E " FAILED " "$W/suite.log") failed," \
        "$(grep -c -E " SKIPPED " "$W/suite.log") skipped"
    pack tests
}

sweeps() {
    local W=$WORK/sweeps
    mkdir -p "$W"
    run() { # name configfile device cores
        local dir=$WORK/run_$1
        mkdir -p "$dir" && tar -C "$REPO" --exclude=./.whl -cf - . | tar -C "$dir" -xf -
        (cd "$dir" && timeout "${SWEEPS:-300}" python3 -m snakemake --cores "$4" \
            --configfile "$2" --config results="$WORK/res_$1" device="$3" \
            >"$W/sweep_$1.log" 2>&1
        echo "sweep $1 rc=$? at $(now)s" | tee -a "$W/sweeps.txt")
    }
    run paper_cpu config/paper.yaml cpu 4 &
    run paper_cuda config/paper.yaml cuda 4 &
    run default_cpu config/config.yaml cpu 4 &
    run default_cuda config/config.yaml cuda 4 &
    wait
    for pair in paper default; do
        for tol in "" "--rtol 1e-6 --atol 1e-9"; do
            # shellcheck disable=SC2086
            python3 bench/compare_runs.py "$WORK/res_${pair}_cpu" "$WORK/res_${pair}_cuda" \
                $tol >"$W/compare_${pair}${tol:+_tol}.txt" 2>&1
            echo "$pair CPU vs CUDA ${tol:-bit for bit}: $(tail -1 "$W/compare_${pair}${tol:+_tol}.txt")"
        done
    done
    for f in "$W"/compare_*.txt; do # the experiments that differ, and how often
        echo "$(basename "$f"): $(grep -v compared "$f" | cut -d/ -f1 | sort | uniq -c | tr '\n' ' ')"
    done
    mkdir -p "$WORK/st" && for r in "$WORK"/res_*; do ln -sfn "$r" "$WORK/st/$(basename "$r")"; done
    timeout 60 python3 bench/gpu_check.py status "$WORK/st" | tee "$W/status.txt"
    pack sweeps
}

for stage in "$@"; do
    case $stage in
    setup | benches | tests | sweeps)
        log "stage $stage"
        use_site
        $stage
        ;;
    *)
        echo "unknown stage $stage: setup, benches, tests, sweeps" >&2
        exit 2
        ;;
    esac
done
log "done"
