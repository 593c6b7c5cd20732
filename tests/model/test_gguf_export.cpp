// dspark's GGUF export against llama.cpp's files: the fixture checkpoint written as F32, Q8_0 and
// Q4_0 has exactly the tensors (names, [cols, rows] shapes, types, bytes) of llama.cpp's
// conversions, the metadata llama.cpp reads, and reads back through our reader.
#include <gtest/gtest.h>

#include <cstring>

#include "expect_error.h"
#include "gguf_test_util.h"
#include "model/gguf_export.h"
#include "tokenizer/tokenizer.h"

namespace dspark::model {
namespace {

void expect_same_tensors(const GgufFile& ours, const GgufFile& reference) {
  ASSERT_EQ(ours.tensors().size(), reference.tensors().size());
  for (const GgufTensorInfo& ref : reference.tensors()) {
    SCOPED_TRACE(ref.name);
    ASSERT_TRUE(ours.contains(ref.name));
    const GgufTensorInfo& t = ours.tensor(ref.name, ref.ne);
    EXPECT_EQ(t.type, ref.type);
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.n_bytes, ref.n_bytes);
    EXPECT_EQ(std::memcmp(t.data, ref.data, ref.n_bytes), 0);
  }
}

TEST(GgufExport, MatchesLlamaCppConversionsOfTheFixture) {
  test::TempDir dir;
  const std::string model_dir = test::fixture("tiny-qwen3-untied").string();
  for (const auto& [type, reference] : {std::pair{GgmlType::kF32, "untied-f32.gguf"},
                                        std::pair{GgmlType::kQ8_0, "untied-q8_0.gguf"},
                                        std::pair{GgmlType::kQ4_0, "untied-q4_0.gguf"}}) {
    SCOPED_TRACE(reference);
    const std::string out = dir.file(std::string("ours-") + reference);
    export_gguf(model_dir, type, out);
    const GgufFile ours = GgufFile::open(out);
    const GgufFile ref = GgufFile::open(test::gguf_fixture(reference).string());
    expect_same_tensors(ours, ref);
    EXPECT_EQ(ours.version(), 3u);
    for (const char* key : {"general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.pre"})
      EXPECT_EQ(ours.get_string(key), ref.get_string(key)) << key;
    for (const char* key : {"qwen3.context_length", "qwen3.embedding_length", "qwen3.block_count",
                            "qwen3.feed_forward_length", "qwen3.attention.head_count", "qwen3.attention.head_count_kv",
                            "qwen3.attention.key_length", "qwen3.attention.value_length", "general.file_type",
                            "tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id"})
      EXPECT_EQ(ours.get_int(key), ref.get_int(key)) << key;
    for (const char* key : {"qwen3.rope.freq_base", "qwen3.attention.layer_norm_rms_epsilon"})
      EXPECT_EQ(ours.get_float(key), ref.get_float(key)) << key;
    EXPECT_EQ(ours.get_strings("tokenizer.ggml.tokens"), ref.get_strings("tokenizer.ggml.tokens"));
    EXPECT_EQ(ours.get_strings("tokenizer.ggml.merges"), ref.get_strings("tokenizer.ggml.merges"));
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(out);
    EXPECT_EQ(tok.encode("<|im_start|>user\nThe quick brown fox<|im_end|>"),
              tokenizer::Tokenizer::load(model_dir).encode("<|im_start|>user\nThe quick brown fox<|im_end|>"));
  }
}

TEST(GgufExport, TensorNamesAndRefusals) {
  EXPECT_EQ(gguf_tensor_name("model.layers.12.mlp.down_proj.weight"), "blk.12.ffn_down.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.post_attention_layernorm.weight"), "blk.0.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.experts.0.weight"), "");
  test::TempDir dir;
  test::expect_error([&] { export_gguf(test::fixture("tiny-qwen3-untied").string(), GgmlType::kQ4_K, dir.file("x.gguf")); },
                     {"Q4_K", "not supported"});
  test::expect_error([&] { export_gguf(dir.file("absent"), GgmlType::kQ8_0, dir.file("x.gguf")); }, {"absent"});
}

}  // namespace
}  // namespace dspark::model
