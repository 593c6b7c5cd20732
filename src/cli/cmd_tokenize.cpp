// dspark tokenize: encode text with a Hugging Face tokenizer.json, one {"ids":[...]} line per input.
// dspark bench tokenizer: encode throughput (MB/s, median of several runs after a warm-up).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;
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

// ---------------------------------------------------------------------------------------------
// dspark bench tokenizer: corpus

struct BenchOptions {
  std::string tokenizer_path;
  std::string file;      // corpus file; empty: build one from the data directory
  std::string data_dir;  // shared/data; empty: search for it
  double corpus_mb = 4.0;
  int runs = 5;
  bool json_output = false;
};

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

// ---------------------------------------------------------------------------------------------
// dspark bench tokenizer: measurement

struct BenchResult {
  double load_s = 0;
  double cold_s = 0;                // the warm-up run, with an empty word cache
  std::vector<double> run_seconds;  // the timed runs
  size_t bytes = 0;
  size_t tokens = 0;

  double median_s() const {
    std::vector<double> sorted = run_seconds;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
  double mb_per_s() const { return static_cast<double>(bytes) / 1e6 / median_s(); }
  double tokens_per_s() const { return static_cast<double>(tokens) / median_s(); }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

BenchResult measure_encode(const std::string& tokenizer_path, const std::string& corpus, int runs) {
  BenchResult result;
  result.bytes = corpus.size();
  auto start = std::chrono::steady_clock::now();
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_path);
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

void print_bench(const BenchResult& result, int runs, bool json_output) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "tokenizer encode: %.2f MB/s, %.0f tokens/s (median of %d runs over %.2f MB, %zu tokens; "
                "first run %.2f MB/s; load %.3f s)\n",
                result.mb_per_s(), result.tokens_per_s(), runs, static_cast<double>(result.bytes) / 1e6, result.tokens,
                static_cast<double>(result.bytes) / 1e6 / result.cold_s, result.load_s);
  if (!json_output) {
    std::fputs(line, stdout);
    return;
  }
  std::fputs(line, stderr);  // keep stdout a single JSON object
  const json report{{"mb_per_s", result.mb_per_s()},
                    {"bytes", result.bytes},
                    {"runs", runs},
                    {"tokens_per_s", result.tokens_per_s()},
                    {"tokens", result.tokens},
                    {"median_s", result.median_s()},
                    {"cold_s", result.cold_s},
                    {"load_s", result.load_s}};
  std::printf("%s\n", report.dump().c_str());
}

void run_bench_tokenizer(const BenchOptions& options) {
  if (options.runs < 1) throw Error("--runs must be at least 1");
  std::string corpus;
  if (!options.file.empty()) {
    corpus = read_whole_file(options.file);
  } else {
    const fs::path dir = options.data_dir.empty() ? find_data_dir() : fs::path(options.data_dir);
    corpus = build_corpus(dir, static_cast<size_t>(options.corpus_mb * 1e6));
  }
  if (corpus.empty()) throw Error("the benchmark corpus is empty");
  print_bench(measure_encode(options.tokenizer_path, corpus, options.runs), options.runs, options.json_output);
  std::fflush(stdout);
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "encode text; prints one {\"ids\":[...]} line per input");
  cmd->add_option("--tokenizer", options->tokenizer_path, "tokenizer.json or the directory holding it")->required();
  CLI::App* input = cmd->add_option_group("input", "exactly one of --text / --jsonl");
  input->add_option("--text", options->text, "the text to encode");
  input->add_option("--jsonl", options->jsonl_path, "file with one {\"text\": ...} object per line");
  input->require_option(1);
  cmd->callback([options] { run_tokenize(*options); });
}

void register_bench_tokenizer(CLI::App& bench) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench.add_subcommand("tokenizer", "encode throughput in MB/s (median after a warm-up)");
  cmd->add_option("--tokenizer", options->tokenizer_path, "tokenizer.json or the directory holding it")->required();
  cmd->add_option("--file", options->file, "corpus file (default: a corpus built from shared/data)");
  cmd->add_option("--data", options->data_dir, "data directory to build the corpus from (default: shared/data)");
  cmd->add_option("--mb", options->corpus_mb, "size of the built corpus in MB (default 4)");
  cmd->add_option("--runs", options->runs, "timed runs after the warm-up (default 5)");
  cmd->add_flag("--json", options->json_output, "print one JSON object on stdout");
  cmd->callback([options] { run_bench_tokenizer(*options); });
}

}  // namespace dspark::cli
