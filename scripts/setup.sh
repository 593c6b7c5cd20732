#!/usr/bin/env bash
# Installs dspark's Debian dependencies (if missing) and builds it into build/.
# Nothing is downloaded except Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libtorch-dev libopenblas0-openmp nlohmann-json3-dev libpcre2-dev
          libutf8proc-dev libcli11-dev libgtest-dev libcpp-httplib-dev
          chromium)  # the dashboard test's browser (tests/serve/node)
# Node.js 20 with its npm runs the real-client tests; the machine's may come from another repository
# with npm bundled, so Debian's are installed only where the commands are missing.
command -v node > /dev/null || packages+=(nodejs)
command -v npm > /dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# CI builds with warnings as errors. Elsewhere the flag is left to the cache (off on a fresh build/):
# switching it changes every object's compile line, so forcing it off would make the main job
# rebuild a developer's CI-configured tree from scratch.
werror=()
if [ -n "${CI:-}" ]; then werror=(-DDSPARK_WERROR=ON); fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${werror[@]}" > /dev/null
cmake --build build -j "$(nproc)"
