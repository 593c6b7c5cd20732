#!/usr/bin/env bash
# Single-request speed of the default model, autoregressive against n-gram drafting and its three
# shipped drafters, side by side (dspark bench speedup): the first LIMIT prompts (default 40) of
# each evaluation file, chat template, 128 new tokens, at T = 0 and T = 1.
# Usage: scripts/bench_speedup.sh [LIMIT]. Writes bench-results/speedup.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-40}
data=../shared/data
out=bench-results
mkdir -p "$out"
target=models/$(basename "$(readlink -f models/default)")
prompts="$data/eval/gsm8k.jsonl,$data/eval/humaneval.jsonl,$data/eval/mbpp.jsonl,$data/chat/vicuna_bench/question.jsonl,$data/chat/self_instruct/user_oriented_instructions.jsonl"
build/dspark bench speedup --target "$target" --draft "$target-dspark,$target-dflash,$target-eagle3" --ngram \
  --prompts "$prompts" --limit "$limit" --max-tokens 128 --temperatures 0,1 --json-out "$out/speedup.json" \
  | tee "$out/speedup.md"
