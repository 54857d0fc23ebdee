#!/usr/bin/env bash
# Record (or resume) a landscape with kvtune itself, then export it as JSONL.
#
#   benchmarks/record_landscape.sh [STUDY_FILE] [RUNS_DIR] [OUT.jsonl]
#
# STUDY_FILE (default benchmarks/landscapes/llama-server-demo.yaml) holds a finite space. Two
# grid studies (seed 0 and seed 1: two grid orders) measure every config once each, each
# measurement on a fresh server, so every config gets two independent measurements. Both resume
# where they stopped (the same command again), so the recording may span several runs; run it
# in the background:  nohup benchmarks/record_landscape.sh > record.log 2>&1 &
# The landscape is judged against $KVTUNE_JUDGE_TARGETS (comma-separated; default
# "ttft_p95<1.5x,tpot_p95<2x", relative to the baseline). Any machine: the hardware fingerprint
# goes into the file's header.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
study_file="${1:-$here/landscapes/llama-server-demo.yaml}"
base="$(basename "$study_file" .yaml)"
runs="${2:-${KVTUNE_LANDSCAPE_RUNS:-kvtune-landscape}}"
out="${3:-$(dirname "$study_file")/$base.jsonl}"
kvtune="${KVTUNE:-kvtune}"
name="${KVTUNE_LANDSCAPE_NAME:-$base}"
judge="${KVTUNE_JUDGE_TARGETS:-ttft_p95<1.5x,tpot_p95<2x}"
# --trials beyond the grid: a grid study ends when every config was measured (space exhausted)
common=(--study-file "$study_file" --set sampler=grid --set informed_start=false --set confirm_top=0
        --runs-dir "$runs" --progress plain --trials 100000 --set repeats=1)
for seed in 0 1; do
    $kvtune run "${common[@]}" --set "seed=$seed" --study "$name-s$seed" || [ $? -eq 1 ]
done
judge_args=()
IFS=',' read -ra targets <<< "$judge"
for t in "${targets[@]}"; do judge_args+=(--judge-target "$t"); done
python "$here/record_landscape.py" "$runs" "$out" --study "$name-s0" --study "$name-s1" \
    --study-file "$study_file" "${judge_args[@]}"
