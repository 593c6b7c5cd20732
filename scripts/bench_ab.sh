#!/usr/bin/env bash
# Side-by-side speed of two dspark binaries (e.g. before and after a refactor), alternating run by
# run so a drift of the shared machine's speed hits both alike; medians of RUNS runs (default 7).
#   scripts/bench_ab.sh OLD_BINARY NEW_BINARY [RUNS] [SERVE_RUNS]
# Single-request generation (greedy, 128 new tokens after a 16-token prompt, EOS ignored) on the
# shipped model, on a random Qwen3-0.6B-shaped model and on models/target-20l when present,
# autoregressive and with a DSpark drafter (random for the 0.6B shape and the 20-layer target:
# acceptance is meaningless there, the point is the drafting and verifying overhead), then
# `bench serve` aggregate throughput (dspark-async, 64 new tokens per request) at C = 1, 8, 64.
# tokens/s is
# (generated - 1) / (end - first token), computed the same way from either binary's JSON. Weights
# are bf16 in both (`--dtype bf16`): binaries from before `--dtype auto` converted every checkpoint
# to bf16, while auto keeps an f32 one f32 (half the speed, which is no engine difference).
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 runs=${3:-7} serve_runs=${4:-5}
out=bench-results/ab
mkdir -p "$out"
big=build/models/qwen3-0.6b-shape
[ -f "$big/config.json" ] || build/dspark model init --config configs/qwen3-0.6b-shape.json --out "$big" --seed 1
[ -f "$out/big-dspark/config.json" ] || build/dspark model init-drafter --target "$big" --method dspark --out "$out/big-dspark" --seed 1
# The shipped default target's own DSpark drafter (models/<target>-dspark).
default_dspark=models/$(basename "$(readlink -f models/default)")-dspark
prompt="3,14,15,92,65,35,89,79,32,38,46,26,43,38,32,79"

rate() {  # one JSON line of `generate --json` -> decode tokens/s
  python3 -c "
import json, sys
s = json.loads(sys.stdin.readline())['stats']
first = s.get('first_token_seconds', s.get('prefill_seconds'))
print((s['generated_tokens'] - 1) / (s['seconds'] - first))"
}
case_ab() {  # label, generate flags...
  local label=$1; shift
  : > "$out/$label.old"; : > "$out/$label.new"
  for i in $(seq "$runs"); do
    # Pairs alternate which binary goes first: the second run of a pair measured ~4% slower on
    # this VM whichever binary it was, which a fixed order would book as a difference.
    local first=$old second=$new
    if [ $((i % 2)) = 1 ]; then first=$new second=$old; fi
    for b in "$first" "$second"; do
      "$b" generate --dtype bf16 --prompt-ids "$prompt" --max-tokens 128 --temperature 0 --ignore-eos --json "$@" 2>/dev/null |
        rate >> "$out/$label.$([ "$b" = "$old" ] && echo old || echo new)"
    done
  done
  # The pair ratios' median with a 95% bootstrap interval (2000 resamples, seed 1): on this VM
  # single runs spread by 5-10%, so the interval says whether a 3% difference is resolved.
  python3 -c "
import random, statistics
o = [float(x) for x in open('$out/$label.old')]; n = [float(x) for x in open('$out/$label.new')]
r = [b / a for a, b in zip(o, n)]
random.seed(1)
boot = sorted(statistics.median(random.choices(r, k=len(r))) for _ in range(2000))
print(f'| $label | {statistics.median(o):.1f} | {statistics.median(n):.1f} | {statistics.median(n) / statistics.median(o):.3f} | '
      f'{statistics.median(r):.3f} [{boot[50]:.3f}, {boot[1949]:.3f}] |')"
}
# CASES (environment) names the single-request cases to run, e.g. CASES="default-ar default-dspark";
# all by default. SERVE_RUNS = 0 skips the bench serve part.
wanted() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }
echo "| single request, tokens/s (median of $runs) | old | new | new / old | median of pair ratios [95% CI] |"
echo "|---|---|---|---|---|"
wanted default-ar && case_ab default-ar --model models/default
wanted default-dspark && case_ab default-dspark --model models/default --draft "$default_dspark"
wanted big-ar && case_ab big-ar --model "$big"
wanted big-dspark && case_ab big-dspark --model "$big" --draft "$out/big-dspark"
# The 67M target with a random drafter (overhead, not acceptance), unless it is the default already.
if [ -f models/target-20l/config.json ] && [ "$(readlink -f models/default)" != "$(readlink -f models/target-20l)" ]; then
  [ -f "$out/target-20l-dspark/config.json" ] ||
    build/dspark model init-drafter --target models/target-20l --method dspark --out "$out/target-20l-dspark" --seed 1
  wanted target-20l-ar && case_ab target-20l-ar --model models/target-20l
  wanted target-20l-dspark && case_ab target-20l-dspark --model models/target-20l --draft "$out/target-20l-dspark"
fi

[ "$serve_runs" -gt 0 ] || exit 0
echo
echo "| bench serve, aggregate tokens/s (median of $serve_runs repeats, alternating binaries) | old | new | new / old |"
echo "|---|---|---|---|"
# One step-cost profile for both binaries, so their schedules decide alike.
[ -f "$out/sps.json" ] || "$new" profile --model models/default --draft "$default_dspark" --max-requests 64 --out "$out/sps.json" > /dev/null 2>&1
serve() {  # binary, schedule, concurrency -> aggregate tok/s
  # --target: a binary's implicit default is models/default of the tree it was built from.
  "$1" bench serve --target models/default --draft "$default_dspark" --schedule "$2" --concurrency "$3" --repeats 1 --max-tokens 64 \
    --sps "$out/sps.json" \
    --prompts ../shared/data/chat/vicuna_bench/question.jsonl --limit 32 --temperature 0 --json 2>/dev/null |
    python3 -c "import json, sys; print(json.load(sys.stdin)[0]['aggregate_tps'])"
}
for c in 1 8 64; do
  for schedule in dspark-async; do
    o=(); n=()
    for i in $(seq "$serve_runs"); do o+=("$(serve "$old" "$schedule" "$c")"); n+=("$(serve "$new" "$schedule" "$c")"); done
    python3 -c "
import statistics
o = statistics.median([$(IFS=,; echo "${o[*]}")]); n = statistics.median([$(IFS=,; echo "${n[*]}")])
print(f'| $schedule C=$c | {o:.1f} | {n:.1f} | {n / o:.3f} |')"
  done
done
