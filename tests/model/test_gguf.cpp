// The GGUF reader against llama.cpp's files (gguf-tiny fixtures): metadata, tensor infos, exact
// dequantization of every type, and a one-line error for each kind of bad file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "gguf_test_util.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

namespace dspark::model {
namespace {

using test::expect_error;
using test::gguf_fixture;

TEST(Gguf, ReadsMetadataOfLlamaCppFile) {
  const GgufFile f = GgufFile::open(gguf_fixture("untied-q4_0.gguf").string());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_int("qwen3.block_count"), 3);
  EXPECT_EQ(f.get_int("qwen3.attention.head_count_kv"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("qwen3.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.merges").front(), "Ġ t");
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  const GgufTensorInfo& q = f.tensor("blk.0.attn_q.weight", {96, 192});
  EXPECT_EQ(q.type, GgmlType::kQ4_0);
  EXPECT_EQ(q.n_bytes, 192u * 3 * 18);
  expect_error([&] { (void)f.get_int("general.architecture"); }, {"untied-q4_0.gguf", "general.architecture", "string"});
  expect_error([&] { (void)f.get_string("qwen3.nope"); }, {"untied-q4_0.gguf", "'qwen3.nope' is missing"});
  expect_error([&] { (void)f.tensor("blk.0.attn_q.weight", {192, 96}); },
               {"untied-q4_0.gguf", "blk.0.attn_q.weight", "[96, 192]", "expected [192, 96]"});
}

// Every fixture file: each tensor has the type expected.json lists, and every reference tensor
// dequantizes to exactly its bits (gguf-py's reference dequantizer), for F32, F16, BF16, Q8_0,
// Q4_0, Q4_K, Q5_K and Q6_K.
TEST(Gguf, DequantizesEveryFixtureTensorBitForBit) {
  std::set<std::string> types_checked;
  for (const std::string& name : test::gguf_fixture_files()) {
    SCOPED_TRACE(name);
    const GgufFile f = GgufFile::open(gguf_fixture(name).string());
    const nlohmann::json expected = test::gguf_expected(name);
    ASSERT_FALSE(expected.is_null());
    ASSERT_EQ(f.tensors().size(), expected["tensor_types"].size());
    for (const auto& [tensor, type] : expected["tensor_types"].items())
      EXPECT_EQ(ggml_type_name(f.tensor(tensor).type), type.get<std::string>()) << tensor;
    for (const auto& d : expected["dequantized"]) {
      const GgufTensorInfo& info = f.tensor(d["tensor"].get<std::string>());
      const std::vector<int64_t> shape = d["shape"];  // [rows, cols]
      ASSERT_EQ(info.ne, (std::vector<int64_t>{shape[1], shape[0]}));
      const std::vector<float> ref = test::read_f32(gguf_fixture(d["file"].get<std::string>()));
      const std::vector<float> ours = f.read_f32(info);
      ASSERT_EQ(ours.size(), ref.size());
      EXPECT_EQ(std::memcmp(ours.data(), ref.data(), ref.size() * sizeof(float)), 0) << d["tensor"] << " " << d["type"];
      types_checked.insert(d["type"].get<std::string>());
    }
  }
  // The fixtures hold every type we read (Q5_K appears in Q4_K_M files only when llama-quantize
  // picks it; the set below is what they hold).
  for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"}) EXPECT_TRUE(types_checked.count(type)) << type;
}

class GgufErrors : public ::testing::Test {
 protected:
  // A one-tensor file: no metadata, tensor "t" F32 ne {8}, data at byte 64.
  std::string small_file() {
    const std::string path = dir_.file("small.gguf");
    GgufTensorToWrite t{"t", GgmlType::kF32, {8}, [](std::vector<uint8_t>& out) { out.assign(32, 0); }};
    write_gguf(path, {}, {t});
    return path;
  }
  static std::string bytes_of(const std::string& path) { return test::read_text(path); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.file(name);
    test::write_text(path, bytes);
    return path;
  }
  test::TempDir dir_;
};

// Byte 49 of small_file() is the tensor's offset field: 24 header bytes, then the name (8 + 1),
// n_dims (4), ne[0] (8) and type (4).
constexpr size_t kOffsetField = 49;

TEST_F(GgufErrors, EachKindOfBadFileIsOneLineNamingFileAndProblem) {
  const std::string good = bytes_of(small_file());
  ASSERT_NO_THROW(GgufFile::open(dir_.file("small.gguf")));

  std::string bad_magic = good;
  bad_magic[0] = 'X';
  expect_error([&] { GgufFile::open(write("magic.gguf", bad_magic)); }, {"magic.gguf", "not a GGUF file"});

  std::string version = good;
  version[4] = 4;
  expect_error([&] { GgufFile::open(write("version.gguf", version)); }, {"version.gguf", "version 4"});

  for (const size_t cut : {size_t{20}, size_t{30}, size_t{50}, size_t{70}}) {
    const std::string name = "cut" + std::to_string(cut) + ".gguf";
    expect_error([&] { GgufFile::open(write(name, good.substr(0, cut))); }, {name});
  }
  expect_error([&] { GgufFile::open(write("data_cut.gguf", good.substr(0, good.size() - 4))); },
               {"data_cut.gguf", "tensor 't'", "past the end"});

  std::string misaligned = good;
  misaligned[kOffsetField] = 4;
  expect_error([&] { GgufFile::open(write("misaligned.gguf", misaligned)); },
               {"misaligned.gguf", "offset 4", "alignment 32"});

  std::string far = good;
  far[kOffsetField + 5] = 1;  // offset 2^40
  expect_error([&] { GgufFile::open(write("far.gguf", far)); }, {"far.gguf", "past the end"});

  std::string type = good;
  type[kOffsetField - 4] = 99;
  expect_error([&] { GgufFile::open(write("type.gguf", type)); }, {"type.gguf", "unknown ggml type 99"});

  std::string huge_count = good;
  huge_count[15] = 0x10;  // tensor count 2^60
  expect_error([&] { GgufFile::open(write("count.gguf", huge_count)); }, {"count.gguf", "tensors"});

  expect_error([&] { GgufFile::open(write("empty.gguf", "")); }, {"empty.gguf", "too short"});
  expect_error([&] { GgufFile::open(dir_.file("absent.gguf")); }, {"absent.gguf", "cannot open"});
}

// Tensor data must follow in the order of the tensor infos, as llama.cpp's reader requires: a
// second tensor pointed at the first one's bytes (two weights sharing data) is refused.
TEST_F(GgufErrors, OverlappingTensorDataIsRefused) {
  const std::string path = dir_.file("two.gguf");
  const auto zeros = [](std::vector<uint8_t>& out) { out.assign(32, 0); };
  write_gguf(path, {}, {{"a", GgmlType::kF32, {8}, zeros}, {"b", GgmlType::kF32, {8}, zeros}});
  ASSERT_NO_THROW(GgufFile::open(path));
  std::string overlap = bytes_of(path);
  // Tensor b's info starts after a's 33 bytes (name 8 + 1, n_dims 4, ne 8, type 4, offset 8); its
  // offset field (32) is its last 8 bytes.
  constexpr size_t kSecondOffsetField = kOffsetField + 33;
  ASSERT_EQ(overlap[kSecondOffsetField], 32);
  overlap[kSecondOffsetField] = 0;
  expect_error([&] { GgufFile::open(write("overlap.gguf", overlap)); },
               {"overlap.gguf", "tensor 'b'", "offset 0, expected 32", "overlapping"});
}

// The writer works under a temporary name: a symlinked destination is written through (the link
// stays a link to the new file), and a failed write leaves the old file as it was and no
// temporary behind.
TEST_F(GgufErrors, WriterReplacesItsDestinationWholeOrNotAtAll) {
  namespace fs = std::filesystem;
  const std::string real = small_file(), link = dir_.file("link.gguf");
  fs::create_symlink(real, link);
  const auto zeros = [](std::vector<uint8_t>& out) { out.assign(64, 0); };
  write_gguf(link, {}, {{"u", GgmlType::kF32, {16}, zeros}});
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(GgufFile::open(real).contains("u"));
  const std::string before = bytes_of(real);
  const auto short_data = [](std::vector<uint8_t>& out) { out.assign(8, 0); };  // 8 bytes for 64
  expect_error([&] { write_gguf(real, {}, {{"v", GgmlType::kF32, {16}, short_data}}); }, {"tensor 'v'", "8 bytes"});
  EXPECT_EQ(bytes_of(real), before);
  for (const auto& entry : fs::directory_iterator(dir_.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST_F(GgufErrors, UnsupportedTensorTypeIsNamedWhenRead) {
  const std::string path = dir_.file("q5_0.gguf");
  GgufTensorToWrite t{"w", GgmlType::kQ5_0, {32, 2}, [](std::vector<uint8_t>& out) { out.assign(44, 0); }};
  write_gguf(path, {}, {t});
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.tensor("w").n_bytes, 44u);
  expect_error([&] { (void)f.read_f32(f.tensor("w")); }, {"q5_0.gguf", "tensor 'w'", "type Q5_0", "not supported"});
}

TEST_F(GgufErrors, DuplicateKeysAndBadAlignmentAreRefused) {
  const std::string dup = dir_.file("dup.gguf");
  write_gguf(dup, {{"a", gguf_uint32(1)}, {"a", gguf_uint32(2)}}, {});
  expect_error([&] { GgufFile::open(dup); }, {"dup.gguf", "'a' appears twice"});
  const std::string align = dir_.file("align.gguf");
  write_gguf(align, {{"general.alignment", gguf_uint32(24)}}, {});
  expect_error([&] { GgufFile::open(align); }, {"align.gguf", "alignment 24", "power of two"});
}

}  // namespace
}  // namespace dspark::model
