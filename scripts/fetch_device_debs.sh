#!/usr/bin/env bash
# Fills .device-carry/ (git-ignored) with what scripts/device_check.sh needs on the GPU machine,
# which has no network and none of our Debian packages:
#   debs/    the Debian 12 packages our CMakeLists.txt finds beyond libtorch, fetched with
#            `apt-get download` (nothing is installed): headers and CMake files of nlohmann-json,
#            CLI11 and GoogleTest, PCRE2 and utf8proc with their runtime libraries, and pkgconf;
#   shared/  copies of the fixtures and prompts the checks read (../shared does not travel).
# Run it before the device call, which names the folder: carry=[".device-carry"].
# Usage: scripts/fetch_device_debs.sh [--debs-only]
set -euo pipefail
cd "$(dirname "$0")/.."

carry=.device-carry
# -dev packages hold the headers, .pc and CMake files; their .so links point into the runtime
# packages listed next to them.
packages=(nlohmann-json3-dev libcli11-dev libgtest-dev libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2
          pkgconf-bin libpkgconf3
          # cpp-httplib (the server); its .pc requires openssl's, zlib's and brotli's
          libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 zlib1g-dev libbrotli-dev libbrotli1)

mkdir -p "$carry/debs"
missing=()
for p in "${packages[@]}"; do
  compgen -G "$carry/debs/${p}_*.deb" > /dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! apt-cache show "${missing[@]}" > /dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q > /dev/null
  fi
  (cd "$carry/debs" && apt-get download -q "${missing[@]}" 2>&1 | grep -v "unsandboxed" || true)
fi
for p in "${packages[@]}"; do
  compgen -G "$carry/debs/${p}_*.deb" > /dev/null || { echo "fetch_device_debs: $p could not be downloaded" >&2; exit 1; }
done
[ "${1:-}" = "--debs-only" ] && exit 0

shared=${DSPARK_SHARED_DIR:-../shared}
for f in fixtures/tiny-qwen3-tied fixtures/tiny-qwen3-untied fixtures/deepspec-tiny data/chat/vicuna_bench/question.jsonl; do
  [ -e "$shared/$f" ] || { echo "fetch_device_debs: $shared/$f: not found (set DSPARK_SHARED_DIR)" >&2; exit 1; }
  mkdir -p "$carry/shared/$(dirname "$f")"
  rm -rf "${carry:?}/shared/$f"
  cp -r "$shared/$f" "$carry/shared/$f"
  chmod -R u+w "$carry/shared/$f"
done
# The device tool sends the working tree (tracked and untracked, not ignored) and the carried
# folder, 64 MiB at most.
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- | tail -1 | cut -f1)
total=$((tree + $(du -sb "$carry" | cut -f1)))
echo "fetch_device_debs: $carry holds $(ls "$carry/debs" | wc -l) packages; with the working tree $((total / 1048576)) MiB travel (limit 64)"
[ "$total" -le $((64 * 1048576)) ] || { echo "fetch_device_debs: over the device tool's 64 MiB" >&2; exit 1; }
