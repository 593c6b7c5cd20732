// dspark tokenize: encode text with a Hugging Face tokenizer.json, one {"ids":[...]} line per input.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace dspark::cli {
namespace {

using nlohmann::json;
using tokenizer::Tokenizer;

// ---------------------------------------------------------------------------------------------
// dspark tokenize

struct TokenizeOptions {
  std::string tokenizer_path;
  std::optional<std::string> text;
  std::optional<std::string> jsonl_path;
};

void print_ids_line(const std::vector<int32_t>& ids) {
  std::string line = "{\"ids\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ',';
    line += std::to_string(ids[i]);
  }
  line += "]}\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
}

// The "text" of one JSONL record; a dspark::Error naming the file and line otherwise.
std::string text_of_record(const std::string& line, const std::string& file, size_t line_number) {
  const std::string where = file + ":" + std::to_string(line_number);
  json record;
  try {
    record = json::parse(line);
  } catch (const json::exception& e) {
    throw Error(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!record.is_object() || !record.contains("text") || !record["text"].is_string()) {
    throw Error(where + ": the JSON object has no \"text\" string");
  }
  return record["text"].get<std::string>();
}

std::vector<int32_t> encode_or_explain(const Tokenizer& tokenizer, const std::string& text, const std::string& where) {
  try {
    return tokenizer.encode(text);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

void tokenize_jsonl(const Tokenizer& tokenizer, const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file + ": cannot open JSONL file");
  std::string line;
  for (size_t line_number = 1; std::getline(in, line); ++line_number) {
    // A blank line holds no record (as jq and pandas read JSONL): skipped, not an error.
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file + ":" + std::to_string(line_number);
    print_ids_line(encode_or_explain(tokenizer, text_of_record(line, file, line_number), where));
  }
}

void run_tokenize(const TokenizeOptions& options) {
  const Tokenizer tokenizer = Tokenizer::load(options.tokenizer_path);
  if (options.text) {
    print_ids_line(encode_or_explain(tokenizer, *options.text, "--text"));
  } else {
    tokenize_jsonl(tokenizer, *options.jsonl_path);
  }
  std::fflush(stdout);
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "encode text; prints one {\"ids\":[...]} line per input");
  cmd->add_option("--tokenizer", options->tokenizer_path, "tokenizer.json or the directory holding it")->required();
  CLI::App* input = cmd->add_option_group("input", "exactly one of --text / --jsonl");
  input->add_option("--text", options->text, "the text to encode");
  input->add_option("--jsonl", options->jsonl_path, "file with one {\"text\": ...} object per line")
      ->check(CLI::ExistingFile);
  input->require_option(1);
  cmd->callback([options] { run_tokenize(*options); });
}

}  // namespace dspark::cli
