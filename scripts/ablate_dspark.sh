#!/usr/bin/env bash
# The paper's DSpark ablations on the default target, as short runs of equal budget (the same data,
# epochs, batch and seeds; only the named setting changes from the baseline: vanilla Markov head,
# rank min(256, hidden / 8), 2 layers, block 7):
#   head     vanilla | rnn
#   rank     32 | 128 | 256
#   depth    1 | 4 layers
#   gamma    one drafter trained with block 16, evaluated at gamma 4, 8 and 16
# then one table of tau (bench accept: DeepSpec's protocol, T = 1) and single-request tokens/s
# against autoregressive (bench speedup, T = 0), on the first LIMIT prompts of each evaluation file.
# Usage: scripts/ablate_dspark.sh [EPOCHS] [LIMIT]   (defaults 0.5 and 10)
# Needs the drafter data of scripts/train_default_drafters.sh ($DATA, default
# runs/drafter-data-20l/regenerated.jsonl). Resumable: a variant whose model/ exists is not trained
# again, an interrupted one resumes from its newest checkpoint. Writes $RUNS (default runs/ablate)
# and $OUT/ablation.{md,json} (default bench-results). The target's features are cached in $FEATURES
# (default runs/features-20l, shared with scripts/train_default_drafters.sh), so only the first variant runs the target.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-0.5}
limit=${2:-10}
target=models/$(basename "$(readlink -f models/default)")
data=${DATA:-runs/drafter-data-20l/regenerated.jsonl}
runs=${RUNS:-runs/ablate}
out=${OUT:-bench-results}
test -f "$data" || { echo "no $data: run scripts/train_default_drafters.sh first" >&2; exit 1; }
mkdir -p "$runs" "$out"

declare -A flags=(
  [baseline]=""
  [rnn]="--markov-head rnn"
  [rank32]="--markov-rank 32"
  [rank128]="--markov-rank 128"
  [rank256]="--markov-rank 256"
  [layers1]="--layers 1"
  [layers4]="--layers 4"
  [block16]="--block-size 16"
)
variants=(baseline rnn rank32 rank128 rank256 layers1 layers4 block16)
for v in "${variants[@]}"; do
  [ -f "$runs/$v/model/config.json" ] && { echo "ablation $v: trained"; continue; }
  echo "ablation $v: training (${flags[$v]:-baseline settings})"
  # shellcheck disable=SC2086  # the flags are words
  build/dspark train drafter --target "$target" --method dspark --data "$data" --out "$runs/$v" ${flags[$v]} \
    --anchors 16 --batch 8 --epochs "$epochs" --eval-every 100000 --save-every 100 --bf16-autocast \
    --feature-cache "${FEATURES:-runs/features-20l}"
done

d=../shared/data
prompts="$d/eval/gsm8k.jsonl,$d/eval/humaneval.jsonl,$d/eval/mbpp.jsonl,$d/chat/vicuna_bench/question.jsonl,$d/chat/self_instruct/user_oriented_instructions.jsonl"
drafts=$(printf "$runs/%s/model," "${variants[@]}")
drafts=${drafts%,}
common=(--target "$target" --prompts "$prompts" --limit "$limit" --max-tokens 128)
build/dspark bench accept "${common[@]}" --draft "$drafts" --temperature 1 --gamma 7 --json-out "$out/ablation-accept.json" > /dev/null
for g in 4 8 16; do
  build/dspark bench accept "${common[@]}" --draft "$runs/block16/model" --temperature 1 --gamma "$g" \
    --json-out "$out/ablation-accept-block16-g$g.json" > /dev/null
done
build/dspark bench speedup "${common[@]}" --draft "$drafts" --temperatures 0 --json-out "$out/ablation-speedup.json" > /dev/null
for g in 4 8; do
  build/dspark bench speedup "${common[@]}" --draft "$runs/block16/model" --gamma "$g" --temperatures 0 \
    --json-out "$out/ablation-speedup-block16-g$g.json" > /dev/null
done
python3 scripts/ablation_table.py "$out" "$runs" | tee "$out/ablation.md"
