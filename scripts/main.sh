#!/usr/bin/env bash
# The main job: build dspark and answer a chat prompt with the shipped default model
# (models/default -> models/tiny-target-8l, trained by scripts/train_default_model.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/dspark generate --chat --prompt "What is 12 times 7?" --max-tokens 128
