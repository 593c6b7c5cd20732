#!/usr/bin/env bash
# Rebuilds the shipped default target from scratch: corpus -> target pretraining (67M parameters,
# 20 layers of width 512, bf16 autocast), then installs the final model into models/target-20l/
# (keeping its README.md model card). The tokenizer is the one every shipped model uses
# (models/tiny-target-8l/tokenizer.json, from `dspark train tokenizer` on the same corpus).
# Usage: scripts/train_default_model.sh [RUN_DIR]   (default: runs/, ignored by git)
# About 1.7 hours on 2 cores with bf16 dot products (AVX512-BF16 or AMX); an interrupted run resumes from its newest checkpoint
# (every 25 steps) when rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:-runs}
mkdir -p "$run"
build/dspark data corpus --out "$run/corpus"
build/dspark train target --config configs/target-20l-512.json --corpus "$run/corpus" \
  --tokenizer models/tiny-target-8l --out "$run/target-20l" --seq-len 512 --batch 16 --epochs 1 \
  --lr 1e-3 --min-lr 1e-4 --warmup 50 --save-every 25 --eval-every 100 --eval-windows 16 --bf16-autocast
dest=models/target-20l
mkdir -p "$dest"
rm -f "$dest"/model*.safetensors "$dest"/model.safetensors.index.json
cp "$run"/target-20l/model/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json} "$dest/"
cp "$run"/target-20l/model/model*.safetensors* "$dest/"
build/dspark eval loss --model "$dest" --corpus "$run/corpus"
