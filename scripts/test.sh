#!/usr/bin/env bash
# Builds dspark and runs the whole test suite (GoogleTest via ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
# The full-size Monte Carlo proof is labelled "full" and run on demand: ctest -L full
ctest --output-on-failure -j "$(nproc)" --timeout 900 -LE full
