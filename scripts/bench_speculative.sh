#!/usr/bin/env bash
# Single-request generation speed, autoregressive against each drafter, and one drafting call's
# time against gamma (dspark bench draft). Usage: scripts/bench_speculative.sh [TARGET_DIR]
# (default: the shipped default model). Random drafters: acceptance is meaningless with them, the
# point is the overhead of drafting and verifying. Medians of 5 runs of 128 greedy tokens.
# Writes bench-results/speculative-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-models/default}
name=$(basename "$(readlink -f "$target")")
out=bench-results
mkdir -p "$out/drafters"
for method in dspark dflash eagle3; do
  dir="$out/drafters/$name-$method"
  [ -f "$dir/config.json" ] || build/dspark model init-drafter --target "$target" --method "$method" --out "$dir" --seed 1
done
prompt="3,14,15,92,65,35,89,79,32,38,46,26,43,38,32,79"
run() {  # label, extra flags...
  local label=$1; shift
  for i in 1 2 3 4 5; do
    build/dspark generate --model "$target" --prompt-ids "$prompt" --max-tokens 128 --temperature 0 --ignore-eos --json "$@"
  done | python3 -c "
import json, statistics, sys
runs = [json.loads(l)['stats'] for l in sys.stdin]
tps = statistics.median(r['tokens_per_second'] for r in runs)
acc = statistics.median(r.get('acceptance_length', 1.0) for r in runs)
print(json.dumps({'method': '$label', 'tokens_per_second': tps, 'acceptance_length': acc, 'runs': len(runs)}))"
}
{
  run autoregressive
  run ngram --method ngram --gamma 4
  for method in dspark dflash eagle3; do run "$method" --draft "$out/drafters/$name-$method"; done
} | tee "$out/speculative-$name.json"
build/dspark bench draft --target "$target" --json > "$out/draft-$name.json"
python3 -c "
import json; d = json.load(open('$out/draft-$name.json'))
for p in d['points']: print(p['method'], p['gamma'], round(p['median_ms'], 3), 'ms')
print('dspark over dflash at gamma 7:', d.get('dspark_over_dflash_at_gamma7'))"
