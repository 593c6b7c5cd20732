#!/usr/bin/env bash
# Reproduces the core-engine figures in docs/benchmarks.md: the forward-cost table (SPS(B)) and AR
# decode speed of a random-weight Qwen3-0.6B-shaped model in bf16 and f32, and tokenizer speed.
# Writes JSON into bench-results/ (not committed). Takes ~3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-results
model=build/models/qwen3-0.6b-shape
mkdir -p "$out"
[ -f "$model/config.json" ] || build/dspark model init --config configs/qwen3-0.6b-shape.json --out "$model" --seed 1
for dtype in bf16 f32; do
  build/dspark bench forward --model "$model" --dtype "$dtype" --json > "$out/forward-$dtype.json"
done
build/dspark bench tokenizer --tokenizer ../shared/fixtures/qwen3-tokenizer --json > "$out/tokenizer.json"
echo "results in $out/"
