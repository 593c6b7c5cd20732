// The parts of tokenizer_config.json the engine uses: the declared bos/eos/pad tokens and the chat
// template (also read from a chat_template.jinja beside it, the newer Hugging Face layout).
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace dspark::tokenizer {

struct TokenizerConfig {
  std::filesystem::path path;  // the tokenizer_config.json read; empty when there was none
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> chat_template;    // Jinja source
  std::filesystem::path chat_template_origin;  // the file the template came from

  // Reads `file`; throws dspark::Error naming it when it is unreadable or not a JSON object.
  static TokenizerConfig load(const std::filesystem::path& file);

  // Reads tokenizer_config.json (and chat_template.jinja) in `directory` if present; returns an
  // empty config when neither exists.
  static TokenizerConfig load_from_directory(const std::filesystem::path& directory);
};

}  // namespace dspark::tokenizer
