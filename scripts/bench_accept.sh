#!/usr/bin/env bash
# The acceptance results of docs/results.md: the shipped drafters of the default model on the
# evaluation prompts (shared/data/eval and the two chat sets), DeepSpec's protocol at T = 1,
# gamma = 7, plus the confidence-threshold sweep. Usage: scripts/bench_accept.sh [LIMIT]
# (prompts per file, default 40). Writes bench-results/accept*.{md,json} and the SVG figures.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-40}
data=../shared/data
out=bench-results
mkdir -p "$out"
prompts="$data/eval/gsm8k.jsonl,$data/eval/humaneval.jsonl,$data/eval/mbpp.jsonl,$data/chat/vicuna_bench/question.jsonl,$data/chat/self_instruct/user_oriented_instructions.jsonl"
target=models/$(basename "$(readlink -f models/default)")
drafts="$target-dspark,$target-dflash,$target-eagle3"
common=(--target "$target" --draft "$drafts" --prompts "$prompts" --temperature 1.0 --gamma 7 --max-tokens 128)
build/dspark bench accept "${common[@]}" --limit "$limit" --plot-dir "$out/accept-plots" \
  --json-out "$out/accept.json" | tee "$out/accept.md"
# The sweep runs DSpark at thresholds 0.1 ... 0.9 on fewer prompts per file.
build/dspark bench accept --target "$target" --draft "$target-dspark" --prompts "$prompts" --temperature 1.0 --gamma 7 \
  --max-tokens 128 --limit $((limit / 4)) --thresholds 0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9 \
  --plot-dir "$out/accept-sweep" --json > "$out/accept-sweep.json"
