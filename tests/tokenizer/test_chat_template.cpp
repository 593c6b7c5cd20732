#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark::tokenizer {
namespace {

namespace fs = std::filesystem;

const fs::path kQwen3Dir = fs::path(DSPARK_SHARED_DIR) / "fixtures" / "qwen3-tokenizer";
const fs::path kTinyDir = fs::path(DSPARK_SHARED_DIR) / "fixtures" / "tiny-qwen3-tied";

const std::vector<ChatMessage> kConversation{{"system", "Be brief."}, {"user", "What is 2+2?"}};

ChatTemplate qwen3_template() { return ChatTemplate::from_config(TokenizerConfig::load_from_directory(kQwen3Dir)); }

TEST(RenderChatml, FormatsEachMessageAndTheGenerationPrompt) {
  EXPECT_EQ(render_chatml(kConversation, ChatOptions{}),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(RenderChatml, NonThinkingFormPrefillsAnEmptyThinkBlock) {
  EXPECT_EQ(render_chatml(kConversation, ChatOptions{.add_generation_prompt = true, .enable_thinking = false}),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(RenderChatml, WithoutGenerationPrompt) {
  const std::vector<ChatMessage> messages{{"user", "hi"}, {"assistant", "hello"}};
  EXPECT_EQ(render_chatml(messages, ChatOptions{.add_generation_prompt = false}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n");
}

TEST(ChatTemplate, TinyFixtureTemplateIsPlainChatml) {
  const ChatTemplate chat = ChatTemplate::from_config(TokenizerConfig::load_from_directory(kTinyDir));
  EXPECT_FALSE(chat.has_thinking_switch());
  EXPECT_EQ(chat.render(kConversation, ChatOptions{}), render_chatml(kConversation, ChatOptions{}));
}

TEST(ChatTemplate, LoadsFromAModelDirectoryOrAFileInIt) {
  const std::string expected = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(ChatTemplate::load(kTinyDir).render({{"user", "hi"}}, {}), expected);
  EXPECT_EQ(ChatTemplate::load(kTinyDir / "tokenizer.json").render({{"user", "hi"}}, {}), expected);
  EXPECT_THROW(ChatTemplate::load(fs::path(DSPARK_SHARED_DIR) / "fixtures" / "deepspec-tiny"), Error);
}

TEST(ChatTemplate, Qwen3GenerationPromptAndNonThinkingForm) {
  const ChatTemplate chat = qwen3_template();
  EXPECT_TRUE(chat.has_thinking_switch());
  EXPECT_EQ(chat.render(kConversation, ChatOptions{}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(chat.render(kConversation, ChatOptions{.enable_thinking = false}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, Qwen3DropsReasoningOfEarlierTurns) {
  const std::vector<ChatMessage> messages{{"user", "a"},
                                          {"assistant", "<think>\nplan\n</think>\n\nA"},
                                          {"user", "b"},
                                          {"assistant", "<think>more</think>B"}};
  EXPECT_EQ(qwen3_template().render(messages, ChatOptions{.add_generation_prompt = false}),
            "<|im_start|>user\na<|im_end|>\n"
            "<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nb<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nmore\n</think>\n\nB<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3GroupsToolResponsesIntoOneUserTurn) {
  const std::vector<ChatMessage> messages{{"user", "q"}, {"tool", "r1"}, {"tool", "r2"}};
  EXPECT_EQ(qwen3_template().render(messages, ChatOptions{.add_generation_prompt = false}),
            "<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
            "<|im_end|>\n");
  const std::vector<ChatMessage> unknown_role{{"developer", "x"}};
  EXPECT_THROW(qwen3_template().render(unknown_role, ChatOptions{}), Error);
}

TEST(ChatTemplate, DefaultSystemPromptOfQwen25StyleTemplates) {
  const std::string source =
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}{%- endif %}"
      "{%- for message in messages %}...{%- endfor %}";
  const ChatTemplate chat = ChatTemplate::from_source(source, "test.json");
  ASSERT_TRUE(chat.default_system_prompt().has_value());
  EXPECT_EQ(*chat.default_system_prompt(), "You are Qwen.");
  const std::vector<ChatMessage> messages{{"user", "hi"}};
  EXPECT_EQ(chat.render(messages, ChatOptions{}),
            "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat.render(kConversation, ChatOptions{}).find("You are Qwen."), std::string::npos);
}

TEST(ChatTemplate, RejectsNonChatmlTemplates) {
  const std::string llama3 =
      "{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
      "{{ message['content'] }}<|eot_id|>{% endfor %}";
  try {
    ChatTemplate::from_source(llama3, "/models/llama/tokenizer_config.json");
    FAIL() << "expected dspark::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("/models/llama/tokenizer_config.json"), std::string::npos) << message;
    EXPECT_NE(message.find("no general Jinja engine yet"), std::string::npos) << message;
  }
  EXPECT_FALSE(is_chatml_template(llama3));
  EXPECT_TRUE(is_chatml_template(*TokenizerConfig::load_from_directory(kTinyDir).chat_template));
}

TEST(ChatTemplate, MissingTemplateIsAnError) {
  TokenizerConfig config;
  config.path = "/models/x/tokenizer_config.json";
  try {
    ChatTemplate::from_config(config);
    FAIL() << "expected dspark::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat_template"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, RenderedPromptTokenizesWithSpecialTokens) {
  const Tokenizer tokenizer = Tokenizer::load(kTinyDir);
  const ChatTemplate chat = ChatTemplate::from_config(tokenizer.config());
  const std::vector<int32_t> ids = tokenizer.encode(chat.render(kConversation, ChatOptions{}));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 457);  // <|im_start|>
  EXPECT_EQ(tokenizer.decode(ids), render_chatml(kConversation, ChatOptions{}));
}

TEST(TokenizerConfig, ReadsDeclaredTokens) {
  const TokenizerConfig config = TokenizerConfig::load_from_directory(kQwen3Dir);
  EXPECT_EQ(config.eos_token, "<|im_end|>");
  EXPECT_EQ(config.pad_token, "<|endoftext|>");
  EXPECT_EQ(config.bos_token, std::nullopt);
  EXPECT_EQ(config.path, kQwen3Dir / "tokenizer_config.json");
}

}  // namespace
}  // namespace dspark::tokenizer
