#!/usr/bin/env bash
# The serving results of docs/results.md: closed-loop clients at concurrency 1..64 under each
# schedule on the default model with its DSpark drafter, all in one run (schedules alternate at
# each concurrency). The step-cost profile behind the dspark schedules is measured on first use at
# the workload's typical context and cached (docs/engine.md). Writes bench-results/serve.{md,json},
# the per-step log steps.jsonl and serve-plots/*.svg.
# Usage: scripts/bench_serve.sh [MAX_TOKENS] (default 128).
set -euo pipefail
cd "$(dirname "$0")/.."
max_tokens=${1:-128}
out=bench-results
mkdir -p "$out"
target=models/$(basename "$(readlink -f models/default)")
build/dspark bench serve --target "$target" --draft "$target-dspark" --step-log "$out/steps.jsonl" \
  --schedule none,mtp1,fixed,threshold,dspark-sync,dspark-async --concurrency 1,2,4,8,16,32,64 \
  --prompts ../shared/data/chat/vicuna_bench/question.jsonl --max-tokens "$max_tokens" --temperature 1.0 \
  --plot-dir "$out/serve-plots" --json-out "$out/serve.json" | tee "$out/serve.md"
