// Bounded, seeded mutation fuzzing of the checkpoint readers: thousands of corrupted and truncated
// copies of a llama.cpp GGUF file and of a safetensors file must each either load or raise a
// dspark::Error, never crash or read out of bounds. fuzz_corpus/ holds adversarial inputs (and
// would hold any that once crashed), each replayed and required to be refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "common/error.h"
#include "gguf_test_util.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"

namespace dspark::model {
namespace {

enum class Outcome { kLoaded, kError };

// Opens a GGUF file and does everything a load does with it short of building the model: reads
// every tensor it can convert and builds the tokenizer from the metadata.
Outcome load_gguf(const std::string& path) {
  try {
    const GgufFile f = GgufFile::open(path);
    for (const GgufTensorInfo& t : f.tensors())
      if (can_dequantize(t.type)) (void)f.read_f32(t);
    if (f.has("tokenizer.ggml.tokens")) (void)tokenizer::Tokenizer::load(path);
    return Outcome::kLoaded;
  } catch (const Error&) {
    return Outcome::kError;
  }
}

Outcome load_safetensors(const std::string& path) {
  try {
    const SafetensorsArchive archive = SafetensorsArchive::open(path);
    for (const std::string& name : archive.names()) {
      try {
        const TensorView& view = archive.get(name);
        volatile uint8_t sink = 0;
        const auto* bytes = static_cast<const uint8_t*>(view.data);
        for (size_t i = 0; i < view.n_bytes; i += 64) sink = sink ^ bytes[i];  // touch every page
        if (view.n_bytes) sink = sink ^ bytes[view.n_bytes - 1];
      } catch (const Error&) {
      }
    }
    return Outcome::kLoaded;
  } catch (const Error&) {
    return Outcome::kError;
  }
}

// One mutation of `bytes`: flip random bytes (mostly in the header, where they matter), write a
// random 8-byte little-endian value (a length or offset) at a random header position, or cut the
// file short.
std::string mutate(std::string bytes, size_t header_bytes, std::mt19937_64& rng) {
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  switch (rng() % 4) {
    case 0:
    case 1: {
      const size_t n_flips = 1 + pick(8);
      for (size_t i = 0; i < n_flips; ++i) bytes[pick(header_bytes)] = static_cast<char>(rng());
      break;
    }
    case 2: {
      const size_t at = pick(header_bytes - 8);
      const uint64_t values[] = {0, 1, 0xffffffffull, 0xffffffffffffffffull, rng(), rng() % 4096, bytes.size()};
      const uint64_t v = values[pick(std::size(values))];
      for (int b = 0; b < 8; ++b) bytes[at + b] = static_cast<char>(v >> (8 * b));
      break;
    }
    default: bytes.resize(pick(bytes.size())); break;
  }
  return bytes;
}

// Mutation count, mutation kinds and the seed are fixed; the bound is on outcomes: every run ends
// in a load or a dspark::Error (a crash would kill the test binary).
template <typename Load>
std::pair<int, int> fuzz(const std::string& seed_file, size_t header_bytes, int n_runs, uint64_t seed, const Load& load) {
  test::TempDir dir;
  const std::string original = test::read_text(seed_file);
  std::mt19937_64 rng(seed);
  int loaded = 0, errors = 0;
  const std::string path = dir.file(std::filesystem::path(seed_file).filename().string());
  for (int i = 0; i < n_runs; ++i) {
    test::write_text(path, mutate(original, std::min(header_bytes, original.size()), rng));
    (load(path) == Outcome::kLoaded ? loaded : errors)++;
  }
  return {loaded, errors};
}

TEST(FuzzLoaders, MutatedGgufLoadsOrRaisesError) {
  const std::string seed_file = test::gguf_fixture("untied-q4_0.gguf").string();
  const size_t header = GgufFile::open(seed_file).data_offset();
  const auto [loaded, errors] = fuzz(seed_file, header, 2000, 21, load_gguf);
  EXPECT_EQ(loaded + errors, 2000);
  EXPECT_GT(errors, 500);  // the mutations do reach the checks
}

TEST(FuzzLoaders, MutatedSafetensorsLoadsOrRaisesError) {
  test::TempDir dir;
  const std::string seed_file = dir.file("model.safetensors");
  std::vector<float> a(64, 1.0f), b(96, 2.0f);
  std::vector<uint16_t> c(32, 0x3f80);
  write_safetensors(seed_file, {{"a", DType::kF32, {8, 8}, a.data(), a.size() * 4},
                                {"b", DType::kF32, {96}, b.data(), b.size() * 4},
                                {"c", DType::kBF16, {4, 8}, c.data(), c.size() * 2}});
  const std::string bytes = test::read_text(seed_file);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  const auto [loaded, errors] = fuzz(seed_file, 8 + header_len, 2000, 22, load_safetensors);
  EXPECT_EQ(loaded + errors, 2000);
  EXPECT_GT(errors, 500);
}

// Hand-made adversarial inputs (arrays nested past the depth limit, dimensions whose product
// overflows, an array or string length far past the file, a safetensors header length of 2^63),
// plus any input the loops above ever crash on: each must be refused with a dspark::Error.
TEST(FuzzLoaders, RegressionCorpusIsRefused) {
  const std::filesystem::path corpus = std::filesystem::path(DSPARK_SOURCE_DIR) / "tests" / "model" / "fuzz_corpus";
  int n_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    EXPECT_EQ(is_gguf_path(path) ? load_gguf(path) : load_safetensors(path), Outcome::kError);
    ++n_files;
  }
  EXPECT_GE(n_files, 5);
}

}  // namespace
}  // namespace dspark::model
