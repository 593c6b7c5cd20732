// The tokenizer read from a GGUF file's metadata (llama.cpp's converter wrote it from the fixture's
// tokenizer.json) encodes and decodes exactly as the tokenizer.json does.
#include <gtest/gtest.h>

#include "../model/gguf_test_util.h"
#include "expect_error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

namespace dspark::tokenizer {
namespace {

using test::gguf_fixture;

const std::vector<std::string> kTexts = {
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces, trailing  \n\nnew lines\r\n and tabs\there",
    "numbers 1234567 and 3.14159, contractions: don't, I'LL, we've",
    "unicode: caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 e\xcc\x81",  // NFC folds e + U+0301
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "punctuation!!! ??? ... --- ''' \"quoted\" (parens) [brackets] {braces}",
};

TEST(TokenizerGguf, EncodesLikeTokenizerJson) {
  const Tokenizer from_json = Tokenizer::load(test::fixture("tiny-qwen3-untied"));
  for (const char* file : {"untied-f32.gguf", "untied-q4_0.gguf"}) {
    const Tokenizer from_gguf = Tokenizer::load(gguf_fixture(file));
    EXPECT_EQ(from_gguf.vocab_size(), from_json.vocab_size()) << file;
    for (int32_t id = 0; id < from_json.vocab_size(); ++id) {
      ASSERT_EQ(from_gguf.id_to_token(id), from_json.id_to_token(id)) << id;
      ASSERT_EQ(from_gguf.is_added(id), from_json.is_added(id)) << id;
    }
    for (const std::string& text : kTexts) {
      const std::vector<int32_t> ids = from_json.encode(text);
      EXPECT_EQ(from_gguf.encode(text), ids) << text;
      EXPECT_EQ(from_gguf.decode(ids), from_json.decode(ids)) << text;
    }
    EXPECT_EQ(from_gguf.eos_id(), from_json.eos_id()) << file;
    EXPECT_EQ(from_gguf.bos_id(), std::optional<int32_t>(456)) << file;  // tokenizer.ggml.bos_token_id
  }
}

TEST(TokenizerGguf, PreTokenizerNamesMapToRegexes) {
  EXPECT_TRUE(gguf_pre_tokenizer("qwen2")->nfc);
  EXPECT_FALSE(gguf_pre_tokenizer("llama-bpe")->nfc);
  EXPECT_NE(gguf_pre_tokenizer("llama-bpe")->pattern.find("\\p{N}{1,3}"), std::string::npos);
  EXPECT_FALSE(gguf_pre_tokenizer("deepseek-coder").has_value());
}

TEST(TokenizerGguf, UnsupportedTokenizersAreRefusedByName) {
  test::TempDir dir;
  const std::string src = gguf_fixture("untied-q4_0.gguf").string();
  const std::string pre = dir.file("pre.gguf");
  test::rewrite_gguf(src, pre, [](test::GgufCopy& c) { test::set_metadata(c, "tokenizer.ggml.pre", model::gguf_string("falcon")); });
  test::expect_error([&] { Tokenizer::load(pre); }, {"pre.gguf", "tokenizer.ggml.pre 'falcon'", "not supported"});
  const std::string spm = dir.file("spm.gguf");
  test::rewrite_gguf(src, spm, [](test::GgufCopy& c) { test::set_metadata(c, "tokenizer.ggml.model", model::gguf_string("llama")); });
  test::expect_error([&] { Tokenizer::load(spm); }, {"spm.gguf", "tokenizer.ggml.model 'llama'"});
  // No chat template in the fixture: a one-line error naming the file.
  test::expect_error([&] { ChatTemplate::load(src); }, {"untied-q4_0.gguf", "no chat_template"});
  const std::string chat = dir.file("chat.gguf");
  test::rewrite_gguf(src, chat, [](test::GgufCopy& c) {
    test::set_metadata(c, "tokenizer.chat_template",
                       model::gguf_string("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
                                          "message.content + '<|im_end|>' + '\\n' }}{%- endfor %}"));
  });
  EXPECT_EQ(ChatTemplate::load(chat).render({{"user", "hi"}}, {.add_generation_prompt = true, .enable_thinking = true}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace dspark::tokenizer
