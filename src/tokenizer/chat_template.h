// Chat formatting for the ChatML family (Qwen2/2.5/3 and models fine-tuned on ChatML):
//   <|im_start|>{role}\n{content}<|im_end|>\n  per message, then <|im_start|>assistant\n to prompt.
// We have no general Jinja engine yet. A template from tokenizer_config.json is accepted only when
// it is ChatML-family; the features that change the output (Qwen3's enable_thinking switch and
// reasoning stripping, Qwen2.5's default system prompt, grouped tool responses) are recognised in
// its source and reproduced. Anything else is a dspark::Error, never a silent fallback.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_config.h"

namespace dspark::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the opening of an assistant turn
  bool enable_thinking = true;        // false: pre-fill an empty <think></think> block (Qwen3)
};

// Plain ChatML. With add_generation_prompt it appends "<|im_start|>assistant\n", and with
// enable_thinking == false also "<think>\n\n</think>\n\n" (Qwen3's non-thinking form).
std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatOptions& options);

// True when a Jinja chat template formats messages with <|im_start|> ... <|im_end|>.
bool is_chatml_template(std::string_view source);

class ChatTemplate {
 public:
  // The template of a tokenizer_config.json; throws dspark::Error when it has none or it is not
  // ChatML-family.
  static ChatTemplate from_config(const TokenizerConfig& config);
  // The template of the model or tokenizer directory `path` (or of the directory of the file
  // `path`), read as TokenizerConfig::load_from_directory does; of a .gguf file, its
  // tokenizer.chat_template.
  static ChatTemplate load(const std::filesystem::path& path);
  // `origin` names the template's file in error messages.
  static ChatTemplate from_source(std::string_view source, const std::string& origin);

  // What the template renders for `messages`; throws dspark::Error for a role it does not handle.
  std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;

  bool has_thinking_switch() const { return thinking_switch_; }
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }

 private:
  void render_message(const std::vector<ChatMessage>& messages, size_t index, size_t last_query_index,
                      std::string& out) const;
  void render_assistant(const ChatMessage& message, bool after_last_query, bool is_last, std::string& out) const;
  void render_tool(const std::vector<ChatMessage>& messages, size_t index, std::string& out) const;

  std::string origin_;
  bool thinking_switch_ = false;               // reads enable_thinking (Qwen3)
  bool strips_reasoning_ = false;              // moves <think> of assistant turns into a reasoning block (Qwen3)
  bool groups_tool_responses_ = false;         // tool messages become <tool_response> in a user turn
  std::optional<std::string> default_system_;  // system prompt used when none is given (Qwen2.5)
};

}  // namespace dspark::tokenizer
