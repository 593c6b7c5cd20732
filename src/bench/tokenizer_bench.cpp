#include "bench/tokenizer_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace dspark::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// All string values of a record (instruction, input, output, question, answer, code, ...).
void collect_strings(const json& value, std::string& out) {
  if (value.is_string()) {
    out += value.get_ref<const std::string&>();
    out += "\n\n";
  } else if (value.is_structured()) {
    for (const json& child : value) collect_strings(child, out);
  }
}

std::string text_of_data_file(const fs::path& file) {
  std::string text;
  const std::string contents = read_whole_file(file);
  try {
    if (file.extension() == ".json") {
      collect_strings(json::parse(contents), text);
      return text;
    }
    size_t start = 0;
    while (start < contents.size()) {
      size_t end = contents.find('\n', start);
      if (end == std::string::npos) end = contents.size();
      if (end > start) collect_strings(json::parse(contents.substr(start, end - start)), text);
      start = end + 1;
    }
  } catch (const json::exception& e) {
    throw Error(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  return text;
}

std::vector<fs::path> data_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() && (extension == ".jsonl" || extension == ".json")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // a reproducible corpus
  return files;
}

// Cuts `text` at or before `limit` bytes without splitting a UTF-8 character.
std::string_view utf8_prefix(std::string_view text, size_t limit) {
  if (limit >= text.size()) return text;
  while (limit > 0 && (static_cast<unsigned char>(text[limit]) & 0xC0) == 0x80) --limit;
  return text.substr(0, limit);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string read_whole_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw Error(file.string() + ": cannot open corpus file");
  std::string contents(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  return contents;
}

// shared/data lives beside the repository; look above the working directory and the executable.
fs::path find_data_dir() {
  if (const char* shared = std::getenv("DSPARK_SHARED_DIR")) {
    if (fs::is_directory(fs::path(shared) / "data")) return fs::path(shared) / "data";
  }
  std::error_code ignored;
  for (fs::path start : {fs::current_path(), fs::read_symlink("/proc/self/exe", ignored).parent_path()}) {
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "shared" / "data")) return dir / "shared" / "data";
      if (dir == dir.root_path()) break;
    }
  }
  throw Error(
      "no corpus: shared/data not found above the working directory or the executable; "
      "pass --file or --data");
}

// An equal share of every data file (chat, code, math), then more from those that have it.
std::string build_corpus(const fs::path& dir, size_t target_bytes) {
  std::vector<std::string> texts;
  for (const fs::path& file : data_files(dir)) texts.push_back(text_of_data_file(file));
  if (texts.empty()) throw Error(dir.string() + ": no .json or .jsonl files for a corpus");
  std::vector<size_t> taken(texts.size(), 0);
  std::string corpus;
  const size_t share = target_bytes / texts.size() + 1;
  for (size_t pass = 0; pass < 2 && corpus.size() < target_bytes; ++pass) {
    for (size_t i = 0; i < texts.size() && corpus.size() < target_bytes; ++i) {
      const size_t budget = pass == 0 ? share : target_bytes - corpus.size();
      const std::string_view piece = utf8_prefix(std::string_view(texts[i]).substr(taken[i]), budget);
      corpus += piece;
      taken[i] += piece.size();
    }
  }
  return corpus;
}

TokenizerBenchResult measure_encode(const std::string& tokenizer_path, const std::string& corpus, int runs) {
  TokenizerBenchResult result;
  result.bytes = corpus.size();
  auto start = std::chrono::steady_clock::now();
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(tokenizer_path);
  result.load_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  result.tokens = tokenizer.encode(corpus).size();
  result.cold_s = seconds_since(start);
  for (int run = 0; run < runs; ++run) {
    start = std::chrono::steady_clock::now();
    const size_t n_tokens = tokenizer.encode(corpus).size();
    result.run_seconds.push_back(seconds_since(start));
    DSPARK_ASSERT(n_tokens == result.tokens);
  }
  return result;
}

json to_json(const TokenizerBenchResult& result, int runs) {
  return {{"mb_per_s", result.mb_per_s()}, {"bytes", result.bytes},         {"runs", runs},
          {"tokens_per_s", result.tokens_per_s()}, {"tokens", result.tokens}, {"median_s", result.median_s()},
          {"cold_s", result.cold_s}, {"load_s", result.load_s}};
}

}  // namespace dspark::bench
