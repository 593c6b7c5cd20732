#!/usr/bin/env bash
# Builds dspark and runs the whole test suite (GoogleTest via ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The .debs the device check carries: its tests unpack them and configure against them.
scripts/fetch_device_debs.sh --debs-only || echo "test.sh: could not download the device check's .debs; its tests will skip" >&2
# The Node tests' packages (the openai client, puppeteer-core), as pinned by their package-lock.json.
if ! npm ci --prefix tests/serve/node --no-audit --no-fund --loglevel=error > /dev/null; then
  echo "test.sh: npm ci in tests/serve/node failed; the node_* tests will skip" >&2
fi
cd build
# The full-size Monte Carlo proof is labelled "full" and run on demand: ctest -L full
ctest --output-on-failure -j "$(nproc)" --timeout 900 -LE full
