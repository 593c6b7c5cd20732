#!/usr/bin/env bash
# The main job: build dspark and answer a chat prompt with the shipped default model (models/default,
# trained by scripts/train_default_model.sh), speculatively with its shipped DSpark drafter
# (models/<target>-dspark, trained by scripts/train_default_drafters.sh) when one is there. The
# last line gives the speed and the acceptance length.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
target=models/$(basename "$(readlink -f models/default)")
draft=()
if [ -f "$target-dspark/config.json" ]; then draft=(--draft "$target-dspark"); fi
build/dspark generate --model "$target" --chat --prompt "What is 12 times 7?" --max-tokens 128 "${draft[@]}"
