#!/usr/bin/env bash
# The main job: build dspark and generate text.
# Until the default model ships (models/default), this runs on a generated random-weight Qwen3
# with the tiny fixture tokenizer, so the text is meaningless; the pipeline is the real one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -f models/default/config.json ]; then
  build/dspark generate --chat --prompt "What is 12 times 7?" --max-tokens 128
else
  model=build/models/qwen3-test
  [ -f "$model/config.json" ] || build/dspark model init --config configs/qwen3-test.json --out "$model" \
      --seed 1 --tokenizer ../shared/fixtures/tiny-qwen3-tied
  build/dspark generate --model "$model" --prompt "Hello world" --max-tokens 48 --temperature 0.8 --seed 1
fi
