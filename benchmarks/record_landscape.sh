#!/usr/bin/env bash
# Record (or resume) a llama-server landscape with kvtune itself, then export it as JSONL.
#
#   benchmarks/record_landscape.sh [RUNS_DIR] [OUT.jsonl]
#
# Study 1 (--seed 0) measures every config of the study file's grid twice on one server
# (--repeats 2); study 2 (--seed 1: another grid order) measures each once more on a fresh
# server, for as many configs as KVTUNE_FRESH_TRIALS allows (default: all 33). Both resume
# where they stopped (the same command again), so the recording may span several runs; run it
# in the background: nohup benchmarks/record_landscape.sh > record.log 2>&1 &
# Any machine: the hardware fingerprint goes into the file's header.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs="${1:-${KVTUNE_LANDSCAPE_RUNS:-kvtune-landscape}}"
out="${2:-$here/landscapes/llama-server-demo.jsonl}"
study_file="$here/landscapes/llama-server-demo.yaml"
kvtune="${KVTUNE:-kvtune}"
name="${KVTUNE_LANDSCAPE_NAME:-llama-server-demo-t1}"
grid=33    # 32 configs + the baseline (kvtune measures the server's defaults first)
common=(--study-file "$study_file" --sampler grid --no-informed-start --confirm-top 0
        --runs-dir "$runs" --progress plain)
$kvtune run "${common[@]}" --trials "$grid" --repeats 2 --seed 0 --study "$name-s0" || [ $? -eq 1 ]
$kvtune run "${common[@]}" --trials "${KVTUNE_FRESH_TRIALS:-$grid}" --repeats 1 --seed 1 \
    --study "$name-s1" || [ $? -eq 1 ]
python "$here/record_landscape.py" "$runs" "$out" --study "$name-s0" --study "$name-s1" \
    --study-file "$study_file"
