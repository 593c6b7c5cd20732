#!/usr/bin/env bash
# The serving soak (not in CI): starts `dspark serve` on the shipped models, runs
# scripts/soak_serve.mjs against it for MINUTES (default 10) of mixed load, stops the server, and
# prints the JSON summary (pass: resident memory grew by < 5% after a one-minute warm-up, no errors).
#   scripts/soak_serve.sh [MINUTES] [extra dspark serve flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"; shift || true
out="$(mktemp)"
build/dspark serve --port 0 --max-concurrency 16 "$@" > "$out" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$out"' EXIT
until grep -q listening "$out"; do sleep 0.2; done
url="$(grep -o 'http://[^ ]*' "$out")"
until curl -sf "$url/health" > /dev/null; do sleep 0.5; done
node scripts/soak_serve.mjs --url "$url" --pid "$server" --minutes "$minutes"
