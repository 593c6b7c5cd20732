#!/usr/bin/env bash
# Trains the default target's drafters with our own pipeline, after scripts/train_default_model.sh:
# the target's own answers to the corpus's train conversations (`data regenerate`, DeepSpec's Qwen3
# sampling), then DSpark, DFlash and EAGLE-3 drafters on them (bf16 autocast where the CPU has
# bf16 dot products), each installed as models/target-20l-METHOD/, then the DSpark drafter's
# confidence head refitted on its own T = 1 rollouts (`train confidence`, 15-27 min) and its STS
# calibration (sts.json beside it).
# Usage: scripts/train_default_drafters.sh [RUN_DIR]   (default: runs/, ignored by git)
# The target's features are cached in RUN_DIR/features-20l (17 GB) on the first epoch and read back after
# (`--feature-cache`: the same weights, about half the time). DSpark trains six epochs (8.7 min per epoch reading the
# cache, 52 min in all once it is full; teacher-forced tau 4.63 after three, 5.01 after six; T = 1 tau on the evaluation
# prompts 2.511 -> 2.659), DFlash two (50 min online; a third moved its tau 2.610 -> 2.629 and its speed within noise),
# EAGLE-3 four (13 min per epoch reading the cache, 52 min; teacher-forced tau 5.06 after two, 5.46 after four;
# T = 1 tau 2.890 -> 3.172): DSpark and EAGLE-3 get the same hour (docs/results.md, "More epochs at an equal hour").
# Every step resumes when rerun: regenerate skips finished
# conversations, training restarts from its newest checkpoint (every 100 steps), and a drafter
# already installed is not trained again.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:-runs}
target=models/target-20l
data="$run/drafter-data-20l/regenerated.jsonl"
test -f "$target/config.json" || { echo "no $target: run scripts/train_default_model.sh first" >&2; exit 1; }
mkdir -p "$(dirname "$data")"
# bf16 autocast only where the CPU has bf16 dot products: elsewhere it is slower than f32.
autocast=()
grep -qw -E "avx512_bf16|amx_bf16" /proc/cpuinfo && autocast=(--bf16-autocast)
build/dspark data regenerate --target "$target" --corpus "$run/corpus" --out "$data" --limit 7000 --batch 32
declare -A epochs=([dspark]=6 [dflash]=2 [eagle3]=4)
for method in dspark dflash eagle3; do
  dest="models/target-20l-$method"
  if [ -f "$dest/config.json" ]; then echo "$dest exists: skipped"; continue; fi
  # The three capture the same target layers, so they share one feature cache (17 GB): the target's
  # forward runs once per conversation in all.
  build/dspark train drafter --target "$target" --method "$method" --data "$data" --out "$run/drafter-20l-$method" \
    --anchors 16 --batch 8 --epochs "${epochs[$method]}" --eval-every 400 --save-every 100 "${autocast[@]}" \
    --feature-cache "$run/features-20l"
  mkdir -p "$dest"
  cp "$run/drafter-20l-$method"/model/* "$dest/"
done
# The confidence head, refitted on rollouts of 2000 training prompts; the other tensors are unchanged.
if [ ! -f models/target-20l-dspark/confidence_refit.json ]; then
  build/dspark train confidence --target "$target" --draft models/target-20l-dspark --corpus "$run/corpus" \
    --limit 2000 --out "$run/drafter-20l-dspark-confidence"
  cp "$run/drafter-20l-dspark-confidence"/{model.safetensors,confidence_refit.json} models/target-20l-dspark/
fi
build/dspark calibrate --target "$target" --draft models/target-20l-dspark --corpus "$run/corpus" --limit 100 \
  --plot models/target-20l-dspark/reliability.svg
