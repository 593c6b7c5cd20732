#!/usr/bin/env bash
# The CUDA check: builds dspark on the GPU machine against the PyTorch there and proves the CUDA
# path, writing everything under $OUT. Prepare here with scripts/fetch_device_debs.sh, then run it
# through the device tool (docs/benchmarks.md, "CUDA"):
#   run(command="scripts/device_check.sh", carry=[".device-carry"], timeout_s=600)
#
# Stages, each time-boxed (`timeout`) inside an overall budget (DSPARK_CHECK_BUDGET_S, default
# 540 s); a failed or timed-out stage is recorded and the next one runs:
#   env, deps (unpack the carried .debs with dpkg -x into a prefix, never into /), configure,
#   build; correctness on CUDA: the gtest cases on DSPARK_TEST_DEVICE=$dev (fixture logits against
#   llama.cpp, greedy speculative = autoregressive for every drafter, DeepSpec conformance),
#   logits CUDA vs CPU and CUDA vs Hugging Face transformers on the same GPU, greedy equality
#   through the CLI with the shipped drafters; speed on CUDA: `bench forward` of the Qwen3-0.6B
#   shape in bf16 beside transformers' decode of the same weights, the step-cost profile and
#   `bench serve` with the shipped models; last, the Monte Carlo losslessness cases at 20k samples.
# $OUT gets summary.json (one entry per stage and the figures), device_check.log (every stage's
# log) and details.tar.gz (logs and result files), rewritten after every stage.
#
# A dry run of the stages' commands on the CPU, with a build made here:
#   DSPARK_CHECK_DEVICE=cpu DSPARK_CHECK_PREBUILT=build OUT=/tmp/out scripts/device_check.sh
#
# Subcommands used by the test suite (no GPU needed):
#   device_check.sh unpack DEBS_DIR PREFIX       unpack the .debs into PREFIX, print the newest glibc
#                                                symbol version they need
#   device_check.sh configure PREFIX BUILD_DIR TORCH_CMAKE_PREFIX [TARGET...]
#                                                configure against the unpacked PREFIX, then build
#                                                the targets named (none: configure only)
set -uo pipefail  # no -e: a failing stage is recorded and the next one runs
cd "$(dirname "$0")/.."
root=$PWD

# ---------------------------------------------------------------------------------------------
# Carried dependencies

# dpkg -x each package into PREFIX (ar + tar where dpkg-deb is missing).
unpack_debs() {
  local debs=$1 prefix=$2 f member tmp
  mkdir -p "$prefix"
  compgen -G "$debs/*.deb" > /dev/null || { echo "unpack: no .deb files in $debs (run scripts/fetch_device_debs.sh)" >&2; return 1; }
  for f in "$debs"/*.deb; do
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$f" "$prefix" || { echo "unpack: $f: dpkg-deb -x failed" >&2; return 1; }
    else
      tmp=$(mktemp -d)
      member=$(ar t "$f" | grep '^data\.tar') && (cd "$tmp" && ar x "$f" "$member") &&
        tar -xf "$tmp/$member" -C "$prefix" || { echo "unpack: $f: cannot extract" >&2; rm -rf "$tmp"; return 1; }
      rm -rf "$tmp"
    fi
  done
  echo "unpack: $(ls "$debs"/*.deb | wc -l) packages into $prefix; newest glibc symbol needed: $(max_glibc "$prefix")"
}

# The newest GLIBC_x.y symbol version any carried binary or library asks for.
max_glibc() {
  find "$1" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 |
    xargs -0 grep -aoh 'GLIBC_2\.[0-9][0-9]*' 2> /dev/null | sort -t. -k2,2n -u | tail -1
}

# pkg-config through the carried pkgconf, reading the carried .pc files: they say prefix=/usr, so
# the sysroot puts PREFIX in front of every -I and -L, and /usr/include is not dropped as a system
# directory (it is not one here).
deps_env() {
  [ "$1" = / ] && return 0  # the system's own packages (a dry run)
  local prefix=$1 lib=$1/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG=$prefix/usr/bin/pkgconf
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

# Configures BUILD_DIR against the carried packages in PREFIX and the libtorch whose CMake files
# lie under TORCH_CMAKE_PREFIX, then builds TARGETs (Ninja when there is one).
configure_and_build() {
  local prefix=$1 build=$2 torch_prefix=$3
  shift 3
  deps_env "$prefix"
  local lib=$prefix/usr/lib/x86_64-linux-gnu generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG" \
    -Dnlohmann_json_DIR="$prefix/usr/share/cmake/nlohmann_json" -DCLI11_DIR="$prefix/usr/share/cmake/CLI11" \
    -DGTest_DIR="$lib/cmake/GTest" -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST || return 1
  [ $# -eq 0 ] || cmake --build "$build" -j "$(nproc)" --target "$@"
}

case "${1:-run}" in
  unpack) unpack_debs "$2" "$3"; exit $? ;;
  configure) shift; configure_and_build "$@"; exit $? ;;
  run) ;;
  *) echo "usage: $0 [run | unpack DEBS_DIR PREFIX | configure PREFIX BUILD_DIR TORCH_CMAKE_PREFIX [TARGET...]]" >&2; exit 2 ;;
esac

# ---------------------------------------------------------------------------------------------
# The device run

[ -n "${OUT:-}" ] || { echo "device_check: OUT is not set (the device tool sets it)" >&2; exit 2; }
carry=${DSPARK_CARRY:-$root/.device-carry}
work=${DSPARK_CHECK_WORK:-/tmp/dspark-device-check}
prefix=$work/deps build=$work/build logs=$work/logs results=$work/results
rm -rf "$logs" "$results" && mkdir -p "$logs" "$results"
start_s=$(date +%s)
deadline=$((start_s + ${DSPARK_CHECK_BUDGET_S:-540}))
export DSPARK_SHARED_DIR=$carry/shared DSPARK_CACHE=$work/cache PYTHONUNBUFFERED=1
[ -d /usr/local/cuda/bin ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=$PATH:/usr/local/cuda/bin
dev=${DSPARK_CHECK_DEVICE:-cuda}
if [ -n "${DSPARK_CHECK_PREBUILT:-}" ]; then  # dry run: a build made elsewhere, the system's packages
  build=$(cd "$DSPARK_CHECK_PREBUILT" && pwd)
  prefix=/
fi
dspark=$build/dspark
q06=$work/qwen3-0.6b-shape

# Writes $OUT/summary.json, device_check.log and details.tar.gz from what the stages left.
publish() {
  python3 "$root/scripts/hf_reference.py" summary --stages "$work/stages.jsonl" --results "$results" \
    --out "$OUT/summary.json" > /dev/null 2>&1 || cp "$work/stages.jsonl" "$OUT/summary.json"
  for f in "$logs"/*.log; do echo "===== $(basename "$f")"; tail -c 200000 "$f"; done > "$OUT/device_check.log"
  tar -czf "$OUT/details.tar.gz" -C "$work" logs results stages.jsonl 2> /dev/null
}

# Appends one stage's outcome to stages.jsonl and publishes.
record() {  # record NAME STATUS RC SECONDS LIMIT_S
  printf '{"stage": "%s", "status": "%s", "rc": %d, "seconds": %d, "limit_s": %d}\n' "$@" >> "$work/stages.jsonl"
  echo "device_check: $1: $2 ($4 s)"
  publish
}

# stage NAME LIMIT_S FUNCTION: runs FUNCTION under `timeout`, within what is left of the budget.
stage() {
  local name=$1 limit=$2 fn=$3 left status rc t0
  left=$((deadline - $(date +%s)))
  if [ "$left" -lt 15 ]; then
    echo "skipped: $left s of the budget left" > "$logs/$name.log"
    record "$name" skipped 0 0 "$limit"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c "$fn" > "$logs/$name.log" 2>&1
  rc=$?
  status=ok
  [ $rc -ne 0 ] && status=failed
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && status=timeout
  record "$name" "$status" "$rc" "$(($(date +%s) - t0))" "$limit"
}

s_env() {
  nvidia-smi || true
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"); print("transformers", transformers.__version__)'
  g++ --version | head -1; cmake --version | head -1; ldd --version | head -1; nproc
  df -h /tmp | tail -1
}
s_deps() {
  unpack_debs "$carry/debs" "$prefix" || return 1
  local need have
  need=$(max_glibc "$prefix" | cut -d_ -f2) have=$(ldd --version | head -1 | grep -o '[0-9]*\.[0-9]*$')
  echo "glibc here $have, carried files need $need"
  [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | tail -1)" = "$have" ]
}
s_configure() {
  rm -rf "$build"
  local torch_prefix
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || return 1
  configure_and_build "$prefix" "$build" "$torch_prefix"
}
s_build() { deps_env "$prefix"; cmake --build "$build" -j "$(nproc)" --target dspark dspark_tests; }

# The gtest cases with models, on CUDA: fixture logits (1e-4 of llama.cpp's), the libtorch path's
# twins, greedy speculative = autoregressive for every drafter, DeepSpec's reference runs.
s_tests_cuda() {
  deps_env "$prefix"
  DSPARK_TEST_DEVICE=$dev "$build/dspark_tests" --gtest_output="json:$results/gtest_cuda.json" \
    --gtest_filter='Device.*:Fixtures/FixtureLogits.*:RaggedBatch.*:Drafters/GreedyEquality.*:Methods/DeepSpecConformance.*'
}

# Logits on CUDA against the CPU (both weight dtypes: both paths compute in f32 from the same
# weights) and against transformers (f32 weights, eager attention, same GPU).
s_logits() {
  deps_env "$prefix"
  local ok=0 name dir dtype device ids
  for spec in "tied:$carry/shared/fixtures/tiny-qwen3-tied" "untied:$carry/shared/fixtures/tiny-qwen3-untied" \
              "default:$root/models/default"; do
    name=${spec%%:*} dir=${spec#*:}
    ids=$(python3 "$root/scripts/hf_reference.py" ids --model "$dir" --n 96)
    for dtype in f32 bf16; do
      for device in cpu "$dev"; do
        "$dspark" --device "$device" logits --model "$dir" --ids "$ids" --dtype "$dtype" --out "$work/$name-$dtype-$device.f32" || ok=1
      done
      python3 "$root/scripts/hf_reference.py" compare --a "$work/$name-$dtype-$dev.f32" --b "$work/$name-$dtype-cpu.f32" \
        --model "$dir" --tolerance 1e-4 --label "$name $dtype $dev vs cpu" --out "$results/logits_${name}_${dtype}_cpu.json" || ok=1
    done
    python3 "$root/scripts/hf_reference.py" logits --model "$dir" --ids "$ids" --dtype float32 --out "$work/$name-hf.f32" || ok=1
    python3 "$root/scripts/hf_reference.py" compare --a "$work/$name-f32-$dev.f32" --b "$work/$name-hf.f32" \
      --model "$dir" --tolerance 1e-3 --label "$name f32 $dev vs transformers" --out "$results/logits_${name}_hf.json" || ok=1
  done
  return $ok
}

# Greedy speculative decoding equals autoregressive through the CLI, for every shipped drafter
# and n-gram, on CUDA.
s_greedy_cli() {
  deps_env "$prefix"
  local ok=0 prompt="1,2,3,4,5,6,7,8" ar spec d
  ar=$("$dspark" --device "$dev" generate --model "$root/models/tiny-target-8l" --prompt-ids "$prompt" --temperature 0 --max-tokens 96 --ignore-eos --json) || return 1
  for d in dspark dflash eagle3 ngram; do
    local draft=(--draft "$root/models/tiny-target-8l-$d")
    [ "$d" = ngram ] && draft=(--method ngram)
    spec=$("$dspark" --device "$dev" generate --model "$root/models/tiny-target-8l" --prompt-ids "$prompt" --temperature 0 --max-tokens 96 --ignore-eos --json \
      "${draft[@]}") || { ok=1; continue; }
    python3 "$root/scripts/hf_reference.py" same-ids --a "$ar" --b "$spec" --label "$d" --out "$results/greedy_$d.json" || ok=1
  done
  return $ok
}

# Decode and T(8)/T(1) of the Qwen3-0.6B shape in bf16, dspark beside transformers on the same weights.
s_bench_forward() {
  deps_env "$prefix"
  [ -f "$q06/config.json" ] || "$dspark" model init --config "$root/configs/qwen3-0.6b-shape.json" --out "$q06" --seed 1 || return 1
  "$dspark" --device "$dev" bench forward --model "$q06" --dtype bf16 --contexts 256 1024 --batch-sizes 1 8 --runs 7 \
    --json > "$results/bench_forward.json" || return 1
  python3 "$root/scripts/hf_reference.py" decode --model "$q06" --dtype bfloat16 --contexts 256 1024 --tokens 64 \
    --out "$results/hf_decode.json"
}

s_profile() {
  deps_env "$prefix"
  "$dspark" --device "$dev" profile --model "$root/models/tiny-target-8l" --draft "$root/models/tiny-target-8l-dspark" --max-requests 16 --gamma 7 --runs 3 \
    --out "$results/step_cost.json"
}

s_serve() {
  deps_env "$prefix"
  local sps=()
  [ -f "$results/step_cost.json" ] && sps=(--sps "$results/step_cost.json")
  "$dspark" --device "$dev" bench serve --target "$root/models/tiny-target-8l" --draft "$root/models/tiny-target-8l-dspark" "${sps[@]}" \
    --schedule none,fixed,dspark-sync --concurrency 1,4,16 --max-tokens 64 --temperature 1.0 \
    --prompts "$carry/shared/data/chat/vicuna_bench/question.jsonl" --json-out "$results/serve.json"
}

# The Monte Carlo losslessness cases at 20k samples each, on CUDA, one process per case so a case
# that runs out of time leaves the others' results.
s_monte_carlo() {
  deps_env "$prefix"
  local ok=0 c
  for c in dspark_T1 eagle3_T1 dflash_T07_topp09 dspark_T07_topp09 dspark_T1_threshold; do
    DSPARK_TEST_DEVICE=$dev DSPARK_MC_SAMPLES=20000 timeout 100 "$build/dspark_tests" \
      --gtest_filter="Drafters/MonteCarloLossless.FirstThreeTokensFollowTheTarget/$c" \
      --gtest_output="json:$results/mc_$c.json" || ok=1
  done
  return $ok
}

export -f unpack_debs max_glibc deps_env configure_and_build s_env s_deps s_configure s_build s_tests_cuda s_logits \
  s_greedy_cli s_bench_forward s_profile s_serve s_monte_carlo
export root carry work prefix build logs results dspark q06 dev
: > "$work/stages.jsonl"
stage env 30 s_env
if [ -z "${DSPARK_CHECK_PREBUILT:-}" ]; then
  stage deps 30 s_deps
  stage configure 90 s_configure
  stage build 330 s_build
fi
for s in "tests_cuda 60" "logits 75" "greedy_cli 30" "bench_forward 90" "profile 45" "serve 60" "monte_carlo 200"; do
  set -- $s
  if [ -x "$dspark" ] && [ -x "$build/dspark_tests" ]; then
    stage "$1" "$2" "s_$1"
  else  # recorded, so the summary says why there are no figures
    echo "skipped: no build" > "$logs/$1.log"
    record "$1" skipped 0 0 "$2"
  fi
done
echo "device_check: done in $(($(date +%s) - start_s)) s; $OUT/summary.json"
