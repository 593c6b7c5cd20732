#!/usr/bin/env bash
# The serving results of docs/results.md: the step-cost profile of the default model with its
# DSpark drafter (the SPS table), then closed-loop clients at concurrency 1..64 under each
# schedule, all in one run (schedules alternate at each concurrency). Writes
# bench-results/step-cost.{json,md}, serve.{md,json} and serve-plots/*.svg.
# Usage: scripts/bench_serve.sh [MAX_TOKENS] (default 128).
set -euo pipefail
cd "$(dirname "$0")/.."
max_tokens=${1:-128}
out=bench-results
mkdir -p "$out"
draft=models/tiny-target-8l-dspark
build/dspark profile --draft "$draft" --max-requests 64 --gamma 7 --runs 5 --out "$out/step-cost.json" \
  > "$out/step-cost.md"
build/dspark bench serve --draft "$draft" --sps "$out/step-cost.json" \
  --schedule none,mtp1,fixed,threshold,dspark-sync,dspark-async --concurrency 1,2,4,8,16,32,64 \
  --prompts ../shared/data/chat/vicuna_bench/question.jsonl --max-tokens "$max_tokens" --temperature 1.0 \
  --plot-dir "$out/serve-plots" --json-out "$out/serve.json" | tee "$out/serve.md"
