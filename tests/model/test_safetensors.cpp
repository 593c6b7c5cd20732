#include "model/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtures = std::string(DSPARK_SHARED_DIR) + "/fixtures";

using test::TempDir;
using test::read_text;
using test::write_text;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file with the given header text and `data_bytes` bytes of data.
std::string raw_file(const std::string& header, size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\x5a');
}

using test::expect_error;

void expect_open_error(const std::string& path, const std::vector<std::string>& needles) {
  std::vector<std::string> all = needles;
  all.push_back(path);
  expect_error([&] { SafetensorsArchive::open(path); }, all);
}

// Parses a safetensors header independently of the code under test.
json read_header(const std::string& path, uint64_t* data_start) {
  std::string bytes = read_text(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  *data_start = 8 + n;
  return json::parse(bytes.substr(8, n));
}

// Every view's bytes equal the file's bytes at the header's offsets.
void expect_views_match_file(const SafetensorsArchive& a, const std::string& file) {
  uint64_t start = 0;
  json header = read_header(file, &start);
  std::string bytes = read_text(file);
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const TensorView& v = a.get(name);
    uint64_t b = entry["data_offsets"][0], e = entry["data_offsets"][1];
    ASSERT_EQ(v.n_bytes, e - b) << name;
    EXPECT_EQ(std::memcmp(v.data, bytes.data() + start + b, v.n_bytes), 0) << name;
    EXPECT_EQ(v.file, file);
  }
}

// ---------------------------------------------------------------------------------------------
// Fixtures

void expect_qwen3_layer(const SafetensorsArchive& a, const std::string& prefix, int64_t hidden,
                        int64_t q_dim, int64_t kv_dim, int64_t head_dim, int64_t inter, DType dt) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"input_layernorm.weight", {hidden}},
      {"post_attention_layernorm.weight", {hidden}},
      {"self_attn.q_proj.weight", {q_dim, hidden}},
      {"self_attn.k_proj.weight", {kv_dim, hidden}},
      {"self_attn.v_proj.weight", {kv_dim, hidden}},
      {"self_attn.o_proj.weight", {hidden, q_dim}},
      {"self_attn.q_norm.weight", {head_dim}},
      {"self_attn.k_norm.weight", {head_dim}},
      {"mlp.gate_proj.weight", {inter, hidden}},
      {"mlp.up_proj.weight", {inter, hidden}},
      {"mlp.down_proj.weight", {hidden, inter}},
  };
  for (const auto& [name, shape] : expected) {
    const TensorView& v = a.get(prefix + name, shape);
    EXPECT_EQ(v.dtype, dt) << name;
    EXPECT_EQ(v.name, prefix + name);
    EXPECT_EQ(v.n_bytes, static_cast<size_t>(v.numel()) * dtype_size(dt));
  }
}

TEST(Safetensors, TiedFixtureIsBf16WithoutLmHead) {
  const std::string dir = kFixtures + "/tiny-qwen3-tied";
  auto a = SafetensorsArchive::open(dir);
  EXPECT_EQ(a.names().size(), 2u + 2u * 11u);
  EXPECT_FALSE(a.contains("lm_head.weight"));
  EXPECT_EQ(a.get("model.embed_tokens.weight", {512, 64}).dtype, DType::kBF16);
  EXPECT_EQ(a.get("model.norm.weight", {64}).dtype, DType::kBF16);
  for (int l = 0; l < 2; ++l)
    expect_qwen3_layer(a, "model.layers." + std::to_string(l) + ".", 64, 64, 32, 16, 128, DType::kBF16);
  EXPECT_EQ(a.metadata().at("format"), "pt");
  expect_views_match_file(a, dir + "/model.safetensors");
  auto names = a.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(Safetensors, UntiedFixtureIsF32WithLmHead) {
  const std::string file = kFixtures + "/tiny-qwen3-untied/model.safetensors";
  auto a = SafetensorsArchive::open(file);
  EXPECT_EQ(a.names().size(), 3u + 3u * 11u);
  EXPECT_EQ(a.get("lm_head.weight", {512, 96}).dtype, DType::kF32);
  EXPECT_EQ(a.get("model.embed_tokens.weight", {512, 96}).dtype, DType::kF32);
  EXPECT_EQ(a.get("model.norm.weight", {96}).dtype, DType::kF32);
  for (int l = 0; l < 3; ++l)
    expect_qwen3_layer(a, "model.layers." + std::to_string(l) + ".", 96, 192, 64, 32, 160, DType::kF32);
  expect_views_match_file(a, file);
}

TEST(Safetensors, DeepSpecDrafterFixture) {
  auto a = SafetensorsArchive::open(kFixtures + "/deepspec-tiny/dspark");
  EXPECT_EQ(a.names().size(), 31u);
  for (const auto& n : a.names()) EXPECT_EQ(a.get(n).dtype, DType::kBF16) << n;
  a.get("markov_head.markov_w1.weight", {512, 16});
  a.get("confidence_head.proj.weight", {1, 112});
  a.get("fc.weight", {96, 192});
  expect_qwen3_layer(a, "layers.1.", 96, 192, 64, 32, 160, DType::kBF16);
}

// The drafter's embed_tokens / lm_head are the target's f32 tensors cast to bf16 by torch
// (round to nearest even), which pins f32_to_bf16 against real data.
TEST(Safetensors, DrafterBf16CopiesMatchOurRounding) {
  auto target = SafetensorsArchive::open(kFixtures + "/tiny-qwen3-untied");
  auto draft = SafetensorsArchive::open(kFixtures + "/deepspec-tiny/dspark");
  for (auto [t_name, d_name] : {std::pair{"model.embed_tokens.weight", "embed_tokens.weight"},
                                std::pair{"lm_head.weight", "lm_head.weight"}}) {
    const TensorView& t = target.get(t_name);
    const TensorView& d = draft.get(d_name, t.shape);
    const auto* tf = static_cast<const float*>(t.data);
    const auto* db = static_cast<const uint16_t*>(d.data);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < t.numel(); ++i) mismatches += f32_to_bf16(tf[i]) != db[i];
    EXPECT_EQ(mismatches, 0) << t_name;
  }
}

// ---------------------------------------------------------------------------------------------
// Round trips

struct Sample {
  std::vector<float> f32 = {1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xbf80, 0x7f80, 0x0001, 0x4049, 0x1234, 0xffff, 0x0000};
  std::vector<uint16_t> f16 = {0x3c00, 0x7bff, 0x0001, 0x8400, 0x3555};
  std::vector<float> big = std::vector<float>(300);
  std::vector<TensorToWrite> tensors() {
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f - 7.0f;
    return {
        {"z.f32", DType::kF32, {2, 3}, f32.data(), f32.size() * 4},
        {"a.bf16", DType::kBF16, {8}, bf16.data(), bf16.size() * 2},
        {"m.f16", DType::kF16, {5, 1}, f16.data(), f16.size() * 2},
        {"scalar", DType::kF32, {}, f32.data(), 4},
        {"empty", DType::kBF16, {0, 3}, nullptr, 0},
        {"model.layers.0.big", DType::kF32, {3, 100}, big.data(), big.size() * 4},
        {"odd", DType::kF16, {3}, f16.data(), 6},
    };
  }
};

void expect_same_tensors(const SafetensorsArchive& a, const std::vector<TensorToWrite>& want) {
  ASSERT_EQ(a.names().size(), want.size());
  for (const TensorToWrite& t : want) {
    ASSERT_TRUE(a.contains(t.name)) << t.name;
    const TensorView& v = a.get(t.name, t.shape);
    EXPECT_EQ(v.dtype, t.dtype) << t.name;
    ASSERT_EQ(v.n_bytes, t.n_bytes) << t.name;
    if (t.n_bytes) {
      EXPECT_EQ(std::memcmp(v.data, t.data, t.n_bytes), 0) << t.name;
    }
  }
}

TEST(Safetensors, WriteReadRoundTripSingleFile) {
  TempDir tmp;
  Sample s;
  auto tensors = s.tensors();
  const std::string path = tmp.file("rt.safetensors");
  write_safetensors(path, tensors);
  auto a = SafetensorsArchive::open(path);
  expect_same_tensors(a, tensors);
  EXPECT_EQ(a.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));

  // Standard layout: header padded to 8, data in the given order, offsets from the data start.
  uint64_t start = 0;
  json header = read_header(path, &start);
  EXPECT_EQ(start % 8, 0u);
  EXPECT_EQ(header["z.f32"]["data_offsets"], json::array({0, 24}));
  EXPECT_EQ(header["a.bf16"]["data_offsets"], json::array({24, 40}));
  EXPECT_EQ(header["scalar"]["shape"], json::array());
  EXPECT_EQ(read_text(path).size(), start + 24 + 16 + 10 + 4 + 0 + 1200 + 6);
  std::string text = read_text(path).substr(8, start - 8);
  EXPECT_EQ(text.rfind("{\"__metadata__\":{\"format\":\"pt\"}", 0), 0u) << text;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.get("z.f32").data) % 8, 0u);
}

TEST(Safetensors, CustomMetadataAndMoves) {
  TempDir tmp;
  Sample s;
  auto tensors = s.tensors();
  write_safetensors(tmp.file("m.safetensors"), tensors, {{"format", "pt"}, {"note", "hi"}});
  auto a = SafetensorsArchive::open(tmp.file("m.safetensors"));
  const TensorView* before = &a.get("z.f32");
  SafetensorsArchive b = std::move(a);
  EXPECT_EQ(&b.get("z.f32"), before);  // views survive moves
  EXPECT_EQ(b.metadata().at("note"), "hi");
  SafetensorsArchive c = SafetensorsArchive::open(kFixtures + "/tiny-qwen3-tied");
  c = std::move(b);
  expect_same_tensors(c, tensors);
}

TEST(Safetensors, WriteReadRoundTripSharded) {
  TempDir tmp;
  Sample s;
  auto tensors = s.tensors();
  // 24 | 16+10+4+0 | 1200 | 6 with a 32-byte limit: the big tensor gets a shard of its own.
  const std::string dir = tmp.file("sharded");
  write_sharded_safetensors(dir, tensors, 32);
  for (int i = 1; i <= 4; ++i)
    EXPECT_TRUE(fs::exists(dir + "/model-0000" + std::to_string(i) + "-of-00004.safetensors")) << i;
  json index = json::parse(read_text(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 24 + 16 + 10 + 4 + 1200 + 6);
  EXPECT_EQ(index["weight_map"]["model.layers.0.big"], "model-00003-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["odd"], "model-00004-of-00004.safetensors");

  auto a = SafetensorsArchive::open(dir);
  expect_same_tensors(a, tensors);
  EXPECT_EQ(a.get("z.f32").file, dir + "/model-00001-of-00004.safetensors");
  EXPECT_EQ(a.get("empty").file, dir + "/model-00002-of-00004.safetensors");
  EXPECT_EQ(a.metadata().at("format"), "pt");
  expect_same_tensors(SafetensorsArchive::open(dir + "/model.safetensors.index.json"), tensors);

  // The fixture, resharded, reads back byte-identical.
  auto fixture = SafetensorsArchive::open(kFixtures + "/tiny-qwen3-untied");
  std::vector<TensorToWrite> all;
  for (const auto& n : fixture.names()) {
    const TensorView& v = fixture.get(n);
    all.push_back({n, v.dtype, v.shape, v.data, v.n_bytes});
  }
  write_sharded_safetensors(tmp.file("untied"), all, 400000);
  auto resharded = SafetensorsArchive::open(tmp.file("untied"));
  expect_same_tensors(resharded, all);
  json untied_index = json::parse(read_text(tmp.file("untied") + "/model.safetensors.index.json"));
  std::set<std::string> shard_files;
  for (auto& [name, file] : untied_index["weight_map"].items()) shard_files.insert(file);
  EXPECT_GT(shard_files.size(), 2u);
  for (const auto& f : shard_files) EXPECT_TRUE(fs::exists(tmp.file("untied") + "/" + f)) << f;
}

TEST(Safetensors, DirectoryResolution) {
  TempDir tmp;
  Sample s;
  auto tensors = s.tensors();
  fs::create_directories(tmp.file("one"));
  write_safetensors(tmp.file("one/weights.safetensors"), tensors);
  EXPECT_EQ(SafetensorsArchive::open(tmp.file("one")).names().size(), tensors.size());

  fs::create_directories(tmp.file("two"));
  write_safetensors(tmp.file("two/a.safetensors"), tensors);
  write_safetensors(tmp.file("two/b.safetensors"), tensors);
  expect_open_error(tmp.file("two"), {"several *.safetensors files", "a.safetensors", "b.safetensors"});
  // model.safetensors wins over other files.
  write_safetensors(tmp.file("two/model.safetensors"), {tensors[0]});
  EXPECT_EQ(SafetensorsArchive::open(tmp.file("two")).names().size(), 1u);

  fs::create_directories(tmp.file("none"));
  expect_open_error(tmp.file("none"), {"no model.safetensors.index.json"});
  expect_open_error(tmp.file("missing.safetensors"), {"no such file"});
}

// ---------------------------------------------------------------------------------------------
// Lookup errors

TEST(Safetensors, GetErrorsNameTensorAndFile) {
  TempDir tmp;
  float data[32] = {};
  const std::string path = tmp.file("model.safetensors");
  write_safetensors(path, {{"x", DType::kF32, {4, 8}, data, sizeof data},
                           {"model.norm.weight", DType::kF32, {2}, data, 8}});
  auto a = SafetensorsArchive::open(tmp.str());
  try {
    a.get("x", {4, 16});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": tensor 'x' has shape [4, 8], expected [4, 16]");
  }
  EXPECT_NO_THROW(a.get("x", {4, 8}));
  expect_error([&] { a.get("lm_head.weight"); }, {tmp.str(), "no tensor named 'lm_head.weight'"});
  expect_error([&] { a.get("norm.weight"); }, {"no tensor named 'norm.weight'", "found 'model.norm.weight'"});
  expect_error([&] { a.get("x\nbad"); }, {"'x\\x0abad'"});
}

TEST(Safetensors, OtherDtypesAreListedButNotLoadable) {
  TempDir tmp;
  const std::string path = tmp.file("i64.safetensors");
  write_text(path, raw_file(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                             R"("w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
                             20));
  auto a = SafetensorsArchive::open(path);
  EXPECT_TRUE(a.contains("ids"));
  EXPECT_EQ(a.names(), (std::vector<std::string>{"ids", "w"}));
  EXPECT_EQ(a.get("w").dtype, DType::kF32);
  expect_error([&] { a.get("ids"); }, {path, "tensor 'ids' has dtype I64", "not supported"});
  // Their sizes are still validated.
  write_text(path, raw_file(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", 8));
  expect_open_error(path, {"tensor 'ids'", "hold 8 bytes", "I64 [2] needs 16"});
}

// ---------------------------------------------------------------------------------------------
// Malformed files: every case names the file and the problem.

struct BadCase {
  const char* what;
  std::string bytes;
  std::vector<std::string> needles;
};

TEST(Safetensors, MalformedFilesAreRejected) {
  TempDir tmp;
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  const std::vector<BadCase> cases = {
      {"empty", "", {"file is 0 bytes", "too short"}},
      {"short", "abc", {"file is 3 bytes", "too short"}},
      {"header past end", le64(100) + "{}", {"header length 100 exceeds file size 10"}},
      {"absurd header", le64(1ull << 60) + "{}", {"header length", "absurd"}},
      {"not json", raw_file("{\"t\": nope}", 0), {"header is not valid JSON"}},
      {"zero-length header", raw_file("", 0), {"header is not valid JSON"}},
      {"array header", raw_file("[1,2]", 0), {"header is not a JSON object"}},
      {"nul padding", raw_file(std::string("{}") + '\0', 0), {"header contains a NUL byte at header offset 2"}},
      {"entry not object", raw_file(R"({"t":5})", 0), {"tensor 't'", "not a JSON object"}},
      {"missing dtype", raw_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 4),
       {"tensor 't'", "'dtype'"}},
      {"unknown dtype", raw_file(R"({"t":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,4]}})", 4),
       {"tensor 't' has unknown dtype 'Q4_K'"}},
      {"missing shape", raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", 4),
       {"tensor 't'", "'shape'"}},
      {"negative shape", raw_file(R"({"t":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,4]}})", 4),
       {"tensor 't' has invalid shape [-1,4]"}},
      {"float shape", raw_file(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
       {"tensor 't' has invalid shape"}},
      {"string shape", raw_file(R"({"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,4]}})", 4),
       {"tensor 't' has invalid shape"}},
      {"shape overflow",
       raw_file(R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", 4),
       {"tensor 't' shape", "overflows"}},
      {"offsets reversed", raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
       {"tensor 't' has invalid data_offsets [8,4]", "begin <= end"}},
      {"offsets wrong arity", raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
       {"tensor 't' has invalid data_offsets"}},
      {"offsets missing", raw_file(R"({"t":{"dtype":"F32","shape":[1]}})", 4),
       {"tensor 't' has invalid data_offsets (missing)"}},
      {"offsets negative", raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4),
       {"tensor 't' has invalid data_offsets"}},
      {"size mismatch", raw_file("{" + std::string(R"("t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]})") + "}", 16),
       {"tensor 't' data_offsets [0, 12] hold 12 bytes, but F32 [2, 2] needs 16"}},
      {"past end of file", raw_file("{" + ok_entry + "}", 15),
       {"tensor 't' data range [65, 81) exceeds file size 80"}},
      {"huge offsets",
       raw_file(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[9223372036854775806,9223372036854775807]}})", 4),
       {"tensor 't' data range", "exceeds file size"}},
      {"duplicate name", raw_file("{" + ok_entry + "," + ok_entry + "}", 16),
       {"header lists tensor 't' twice"}},
      // The byte ranges must tile the data section, as the reference reader requires.
      {"overlapping tensors",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
       {"tensor 'b' data_offsets begin at 0, expected 4", "overlapping"}},
      {"gap before a tensor", raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       {"tensor 't' data_offsets begin at 4, expected 0"}},
      {"bytes after the tensors", raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8),
       {"the tensors hold 4 data bytes, but the file has 8"}},
      {"metadata not object", raw_file(R"({"__metadata__":[1]})", 0), {"__metadata__ is not a JSON object"}},
      {"metadata not strings", raw_file(R"({"__metadata__":{"format":1}})", 0),
       {"__metadata__ value for 'format' is not a string"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].what);
    const std::string path = tmp.file("bad" + std::to_string(i) + ".safetensors");
    write_text(path, cases[i].bytes);
    expect_open_error(path, cases[i].needles);
  }
  // A directory passed where a file is expected.
  fs::create_directories(tmp.file("d.safetensors"));
  fs::create_directories(tmp.file("outer"));
  fs::create_directories(tmp.file("outer/x.safetensors"));
  expect_open_error(tmp.file("outer"), {"no model.safetensors.index.json"});
}

// Deep nesting must not blow the stack.
TEST(Safetensors, DeeplyNestedHeaderIsAnError) {
  TempDir tmp;
  const std::string path = tmp.file("deep.safetensors");
  write_text(path, raw_file(std::string(1 << 18, '['), 0));
  expect_open_error(path, {"header is not valid JSON"});
  write_text(path, raw_file(std::string(1 << 18, '[') + std::string(1 << 18, ']'), 0));
  expect_open_error(path, {"header is not a JSON object"});
}

// Truncations and byte flips of a valid file either load consistently or throw dspark::Error.
TEST(Safetensors, CorruptedFilesNeverCrash) {
  TempDir tmp;
  Sample s;
  const std::string good = tmp.file("good.safetensors");
  write_safetensors(good, s.tensors());
  const std::string bytes = read_text(good);
  int n_files = 0;
  auto try_open = [&](const std::string& content) {
    // A new name each time: truncating a file in place is slow on some file systems.
    const std::string path = tmp.file("corrupt" + std::to_string(n_files++) + ".safetensors");
    write_text(path, content);
    struct Remove {
      const std::string& p;
      ~Remove() { std::remove(p.c_str()); }
    } remove_after{path};
    try {
      auto a = SafetensorsArchive::open(path);
      for (const auto& n : a.names()) {
        if (!a.get(n).n_bytes) continue;
        volatile uint8_t sum = 0;  // touch every byte
        const auto* p = static_cast<const uint8_t*>(a.get(n).data);
        for (size_t i = 0; i < a.get(n).n_bytes; ++i) sum = sum + p[i];
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  for (size_t len = 0; len < bytes.size(); ++len) try_open(bytes.substr(0, len));
  const size_t header_end = 8 + static_cast<size_t>(static_cast<uint8_t>(bytes[0])) +
                            256 * static_cast<uint8_t>(bytes[1]);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string c = bytes;
    size_t pos = rng() % header_end;
    c[pos] = static_cast<char>("0123456789[]{},:\"-e. x"[rng() % 22]);
    try_open(c);
  }
}

// ---------------------------------------------------------------------------------------------
// Sharded-set errors

TEST(Safetensors, ShardedSetErrors) {
  TempDir tmp;
  float data[4] = {1, 2, 3, 4};
  const std::string dir = tmp.str();
  const std::string index = tmp.file("model.safetensors.index.json");
  write_safetensors(tmp.file("s1.safetensors"), {{"a", DType::kF32, {2}, data, 8}, {"b", DType::kF32, {2}, data, 8}});
  write_safetensors(tmp.file("s2.safetensors"), {{"a", DType::kF32, {2}, data, 8}, {"c", DType::kF32, {2}, data, 8}});
  write_safetensors(tmp.file("s3.safetensors"), {{"d", DType::kF32, {2}, data, 8}});

  write_text(index, R"({"weight_map":{"a":"s1.safetensors","c":"s2.safetensors"}})");
  expect_error([&] { SafetensorsArchive::open(dir); },
               {tmp.file("s2.safetensors"), "tensor 'a' also appears in", tmp.file("s1.safetensors")});

  write_text(index, R"({"weight_map":{"b":"s1.safetensors","x":"s9.safetensors"}})");
  expect_error([&] { SafetensorsArchive::open(dir); },
               {index, "shard file " + tmp.file("s9.safetensors"), "tensor 'x'", "does not exist"});

  write_text(index, R"({"weight_map":{"b":"s1.safetensors","d":"s1.safetensors"}})");
  expect_error([&] { SafetensorsArchive::open(dir); },
               {index, "tensor 'd' is listed in shard " + tmp.file("s1.safetensors"),
                "does not contain it"});

  write_text(index, R"({"weight_map":{"b":"s1.safetensors","d":"s3.safetensors"}})");
  auto ok = SafetensorsArchive::open(dir);
  EXPECT_EQ(ok.names(), (std::vector<std::string>{"a", "b", "d"}));  // unlisted 'a' still loads
  EXPECT_EQ(ok.get("d").file, tmp.file("s3.safetensors"));

  write_text(index, "{\"weight_map\": ");
  expect_error([&] { SafetensorsArchive::open(dir); }, {index, "not valid JSON"});
  write_text(index, R"({"metadata":{}})");
  expect_error([&] { SafetensorsArchive::open(dir); }, {index, "'weight_map'"});
  write_text(index, R"({"weight_map":{"b":3}})");
  expect_error([&] { SafetensorsArchive::open(dir); }, {index, "tensor 'b' is not a file name"});
  write_text(index, "[]");
  expect_error([&] { SafetensorsArchive::open(index); }, {index, "not a JSON object"});
  // Shards are files beside the index, never elsewhere on the machine.
  write_text(index, R"({"weight_map":{"b":"/etc/passwd"}})");
  expect_error([&] { SafetensorsArchive::open(dir); }, {index, "'/etc/passwd'", "outside the model directory"});
  write_text(index, R"({"weight_map":{"b":"../s1.safetensors"}})");
  expect_error([&] { SafetensorsArchive::open(dir); }, {index, "outside the model directory"});

  // A corrupt shard is reported under its own name.
  write_text(tmp.file("s3.safetensors"), "xy");
  write_text(index, R"({"weight_map":{"d":"s3.safetensors"}})");
  expect_error([&] { SafetensorsArchive::open(dir); }, {tmp.file("s3.safetensors"), "too short"});
}

TEST(Safetensors, WriterRejectsInconsistentTensors) {
  TempDir tmp;
  float data[4] = {};
  const std::string path = tmp.file("w.safetensors");
  expect_error([&] { write_safetensors(path, {{"a", DType::kF32, {4}, data, 8}}); },
               {path, "tensor 'a'", "8 bytes given", "F32 [4] needs 16"});
  expect_error([&] { write_safetensors(path, {{"a", DType::kF32, {1}, data, 4}, {"a", DType::kF32, {1}, data, 4}}); },
               {path, "tensor 'a' given twice"});
  expect_error([&] { write_safetensors(path, {{"a", DType::kF32, {-1}, data, 4}}); },
               {path, "invalid shape [-1]"});
  expect_error([&] { write_safetensors(path, {{"a", DType::kF32, {1}, nullptr, 4}}); },
               {path, "has no data"});
  expect_error([&] { write_safetensors(tmp.file("no/such/dir/x.safetensors"), {}); },
               {"cannot open for writing"});
}

// ---------------------------------------------------------------------------------------------
// Conversions

TEST(Safetensors, DtypeNamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::kF32), "F32");
  EXPECT_STREQ(dtype_name(DType::kF16), "F16");
  EXPECT_STREQ(dtype_name(DType::kBF16), "BF16");
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Safetensors, Bf16ToF32IsExact) {
  for (uint32_t h = 0; h < 65536; ++h) EXPECT_EQ(bits_of(bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
}

// Reference: the nearer of the two bf16 neighbours, ties to the even one, in double arithmetic.
uint16_t reference_bf16(float f) {
  uint32_t u = bits_of(f);
  uint16_t lo = static_cast<uint16_t>(u >> 16);
  if ((u & 0xffff) == 0) return lo;
  uint16_t hi = static_cast<uint16_t>(lo + 1);
  double d = f, dl = bf16_to_f32(lo), dh = std::isinf(bf16_to_f32(hi)) ? std::ldexp(1.0, 128) * (f < 0 ? -1 : 1)
                                                                     : bf16_to_f32(hi);
  double el = std::fabs(d - dl), eh = std::fabs(d - dh);
  if (el < eh) return lo;
  if (eh < el) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(Safetensors, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32_to_bf16(3.4028235e38f), 0x7f80);  // FLT_MAX rounds up to infinity
  for (float nan : {NAN, -NAN}) EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(nan))));
  uint32_t snan_bits = 0x7f800001;  // payload only in the low bits: must not become infinity
  float snan;
  std::memcpy(&snan, &snan_bits, 4);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(snan))));
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), reference_bf16(f)) << std::hex << u;
  }
}

TEST(Safetensors, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << h;
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
}

TEST(Safetensors, F32ToF16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie with odd 0x7bff -> infinity
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);                 // tie -> even zero
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);                 // 1.5 ulps: tie -> 2
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -14)), 0x8400);               // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);  // rounds up to normal
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);         // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
#ifdef __FLT16_MAX__
  std::mt19937 rng(11);
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 45u) << 23);  // concentrate on f16's range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(f32_to_f16(f), ref_bits) << std::hex << u;
  }
#endif
}

}  // namespace
}  // namespace dspark::model
