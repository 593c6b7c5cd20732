#!/usr/bin/env bash
# Rebuilds the shipped default model from scratch: corpus -> tokenizer -> target pretraining, then
# installs the final model into models/tiny-target-8l/ (keeping its README.md model card).
# Usage: scripts/train_default_model.sh [RUN_DIR]   (default: runs/, ignored by git)
# About 1 hour on 2 cores; interrupted runs resume from the newest checkpoint when rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:-runs}
mkdir -p "$run"
build/dspark data corpus --out "$run/corpus"
build/dspark train tokenizer --corpus "$run/corpus" --out "$run/tokenizer"
build/dspark train target --config configs/target-8l-256.json --corpus "$run/corpus" --tokenizer "$run/tokenizer" \
  --out "$run/target" --seq-len 512 --batch 16 --epochs 1 --lr 2e-3 --min-lr 2e-4 --warmup 50 \
  --save-every 50 --eval-every 100 --eval-windows 16
dest=models/tiny-target-8l
mkdir -p "$dest"
cp "$run"/target/model/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json,model.safetensors} "$dest/"
build/dspark eval loss --model "$dest" --corpus "$run/corpus"
