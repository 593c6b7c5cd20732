#!/usr/bin/env bash
# The server's overhead, side by side in one run: the in-process `bench serve` and `bench serve
# --url` against a running `dspark serve`, the same workload (gsm8k prompts, 64 fixed-length output
# tokens, request i = prompt i mod n with seed i, the `fixed` schedule with the shipped dspark
# drafter), alternating run by run at C = 1, 8 and 32, REPEATS times (default 5). Prints the median
# aggregate output tokens/s of each and their ratio, and at C = 1 the client's TTFT against the
# server's own time to first token (queue + prefill, from /metrics), which is what HTTP adds.
#   scripts/bench_server_overhead.sh [REPEATS] [THREADS]
# THREADS (default: all cores) is the model's thread count in both the server and the in-process
# run; the load generator runs with one thread. On a 2-core machine, THREADS=1 leaves a core to
# the HTTP threads and the client; with 2, they preempt the engine's OpenMP workers.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
threads=${2:-0}
out=bench-results/server-overhead
mkdir -p "$out"
prompts=../shared/data/eval/gsm8k.jsonl
# The sampling is spelled out: the server would otherwise apply the model's generation_config.json
# (top-k 20, top-p 0.8) where the in-process benchmark samples from the whole distribution.
common=(--prompts "$prompts" --max-tokens 64 --ignore-eos --temperature 1 --top-k 0 --top-p 1)

# The server's own choice: the default model with the DSpark drafter shipped beside it.
draft=models/$(basename "$(readlink -f models/default)")-dspark
log="$out/server.log"
build/dspark --threads "$threads" serve --port 0 --schedule fixed --max-concurrency 32 > "$log" 2> "$out/server.err" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
until grep -q listening "$log"; do sleep 0.2; done
url="$(grep -o 'http://[^ ]*' "$log")"
until curl -sf "$url/health" > /dev/null; do sleep 0.5; done

ttft_sum_count() {  # the server's TTFT histogram: "sum count"
  curl -s "$url/metrics" | awk '/^vllm:time_to_first_token_seconds_sum/ {s=$2} /^vllm:time_to_first_token_seconds_count/ {c=$2} END {print s, c}'
}

for r in $(seq "$repeats"); do
  build/dspark --threads "$threads" bench serve --target models/default --draft "$draft" --schedule fixed --concurrency 1,8,32 --repeats 1 \
    "${common[@]}" --json-out "$out/inproc.$r.json" > /dev/null 2>&1
  build/dspark --threads 1 bench serve --url "$url" --max-concurrency 1 "${common[@]}" --json-out "$out/http1.$r.json" \
    > /dev/null 2>&1 &
  client=$!
  before=$(ttft_sum_count)
  wait $client
  after=$(ttft_sum_count)
  echo "$before $after" > "$out/server_ttft.$r.txt"
  build/dspark --threads 1 bench serve --url "$url" --max-concurrency 8,32 "${common[@]}" --json-out "$out/http.$r.json" \
    > /dev/null 2>&1
  echo "repeat $r of $repeats done" >&2
done

python3 - "$out" "$repeats" <<'EOF'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
inproc, http, client_ttft, server_ttft = {}, {}, [], []
for r in range(1, repeats + 1):
    for p in json.load(open(f"{out}/inproc.{r}.json")):
        inproc.setdefault(p["concurrency"], []).append(p["aggregate_tps"])
    for name in (f"{out}/http1.{r}.json", f"{out}/http.{r}.json"):
        for p in json.load(open(name)):
            http.setdefault(p["concurrency"], []).append(p["aggregate_tps"])
            if p["concurrency"] == 1:
                client_ttft.append(p["ttft_ms"]["mean"])
    s0, c0, s1, c1 = map(float, open(f"{out}/server_ttft.{r}.txt").read().split())
    # The bench's first request (sent alone, before the point) is in the server's count too.
    server_ttft.append(1e3 * (s1 - s0) / (c1 - c0))
print("| C | in-process tok/s | HTTP tok/s | HTTP / in-process |")
print("|---|---|---|---|")
for c in sorted(inproc):
    a, b = statistics.median(inproc[c]), statistics.median(http[c])
    print(f"| {c} | {a:.0f} | {b:.0f} | {b / a:.3f} |")
ct, st = statistics.median(client_ttft), statistics.median(server_ttft)
print(f"\nC = 1: client TTFT {ct:.2f} ms (mean per run, median of {repeats}), "
      f"server time to first token {st:.2f} ms, HTTP adds {ct - st:.2f} ms")
EOF
