#!/usr/bin/env bash
# Rebuilds the shipped default target: corpus -> the 8-layer model (models/tiny-target-8l) grown
# into 20 layers of width 512 (67M parameters) computing the same function (`--grow-from`,
# model/model_grow.h), then trained on an eighth of an epoch of the same corpus; installs the final
# model into models/target-20l/ (keeping its README.md model card) and prints its validation loss.
# The tokenizer is the one every shipped model uses (models/tiny-target-8l/tokenizer.json).
# Usage: scripts/train_default_model.sh [RUN_DIR]   (default: runs/, ignored by git)
# About 1.2 hours on 2 cores (f32 matmuls; bf16 autocast where the CPU has bf16 dot products, which
# halves it); an interrupted run resumes from its newest checkpoint (every 25 steps) when rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:-runs}
mkdir -p "$run"
autocast=()
grep -qw -E "avx512_bf16|amx_bf16" /proc/cpuinfo && autocast=(--bf16-autocast)
build/dspark data corpus --out "$run/corpus"
build/dspark train target --config configs/target-20l-512.json --corpus "$run/corpus" \
  --tokenizer models/tiny-target-8l --grow-from models/tiny-target-8l --out "$run/target-20l" \
  --seq-len 512 --batch 8 --epochs 0.13 --lr 2e-4 --min-lr 2e-5 --warmup 10 \
  --save-every 25 --eval-every 50 --eval-windows 4 "${autocast[@]}"
dest=models/target-20l
mkdir -p "$dest"
rm -f "$dest"/model*.safetensors "$dest"/model.safetensors.index.json
cp "$run"/target-20l/model/{config.json,tokenizer.json,tokenizer_config.json} "$dest/"
# The sampling defaults every shipped model keeps (Qwen3's non-thinking recipe).
cp models/tiny-target-8l/generation_config.json "$dest/"
cp "$run"/target-20l/model/model*.safetensors* "$dest/"
build/dspark eval loss --model "$dest" --corpus "$run/corpus"
