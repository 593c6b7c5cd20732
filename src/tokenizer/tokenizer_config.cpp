#include "tokenizer/tokenizer_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"

namespace dspark::tokenizer {
namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open file");
  std::ostringstream contents;
  contents << in.rdbuf();
  return std::move(contents).str();
}

// A special token is written either as a string or as an AddedToken object {"content": ...}.
std::optional<std::string> token_field(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

// chat_template is a string, or a list of {"name", "template"} of which "default" is the chat one.
std::optional<std::string> chat_template_field(const json& config) {
  if (!config.contains("chat_template")) return std::nullopt;
  const json& value = config["chat_template"];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    for (const json& entry : value) {
      if (entry.is_object() && entry.value("name", std::string()) == "default" && entry.contains("template")) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return std::nullopt;
}

}  // namespace

TokenizerConfig TokenizerConfig::load(const std::filesystem::path& file) {
  json config;
  try {
    config = json::parse(read_text(file));
  } catch (const json::exception& e) {
    throw Error(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw Error(file.string() + ": the top level is not a JSON object");
  TokenizerConfig result;
  result.path = file;
  result.bos_token = token_field(config, "bos_token");
  result.eos_token = token_field(config, "eos_token");
  result.pad_token = token_field(config, "pad_token");
  result.chat_template = chat_template_field(config);
  if (result.chat_template) result.chat_template_origin = file;
  return result;
}

TokenizerConfig TokenizerConfig::load_from_directory(const std::filesystem::path& directory) {
  const std::filesystem::path config_file = directory / "tokenizer_config.json";
  TokenizerConfig result = std::filesystem::exists(config_file) ? load(config_file) : TokenizerConfig{};
  const std::filesystem::path jinja_file = directory / "chat_template.jinja";
  if (!result.chat_template && std::filesystem::exists(jinja_file)) {
    result.chat_template = read_text(jinja_file);
    result.chat_template_origin = jinja_file;
  }
  return result;
}

}  // namespace dspark::tokenizer
