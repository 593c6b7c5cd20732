#include "train/corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "common/error.h"
#include "common/fnv1a.h"
#include "sampling/rng.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/unicode.h"

namespace dspark::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ojson = nlohmann::ordered_json;  // keeps written keys in a readable order

// ---------------------------------------------------------------------------------------------
// Deterministic randomness: SplitMix64 and Fisher-Yates, so the split is the same on every
// platform and standard library (std::shuffle and the std distributions are not specified).

uint64_t splitmix64(uint64_t& state) { return sampling::mix64(state += 0x9E3779B97F4A7C15ull); }

// A uniform index in [0, n).
size_t below(uint64_t& state, size_t n) {
  return static_cast<size_t>((static_cast<unsigned __int128>(splitmix64(state)) * n) >> 64);
}

template <typename T>
void shuffle(std::vector<T>& items, uint64_t& state) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(state, i)]);
}

uint64_t stream_seed(uint64_t seed, std::string_view purpose) {
  uint64_t state = seed ^ fnv1a(purpose);
  return splitmix64(state);
}

// ---------------------------------------------------------------------------------------------
// The sources. Only these files are ever opened; see shared/data/SOURCES.md for the split.

// Paths that hold evaluation prompts and must never be read; build_corpus checks kSources
// against them so a later edit cannot slip one in.
constexpr std::array<std::string_view, 7> kEvalPaths{
    "eval/",
    "code/humaneval/",
    "chat/vicuna_bench/",
    "chat/self_instruct/user_oriented_instructions.jsonl",
    "math/gsm8k/test.jsonl",
    "math/gsm8k/test_socratic.jsonl",
    "code/mbpp/sanitized-mbpp.json",  // its tasks are mostly in the MBPP test range
};

// MBPP tasks 601-974 are the official train split; 1-600 are test, prompt and validation.
constexpr int64_t kMbppFirstTrainTask = 601;
constexpr int64_t kMbppLastTrainTask = 974;

constexpr std::string_view kMathInstruction = "Please reason step by step, and put your final answer within \\boxed{}.";

// The added tokens of our tokenizers; a record whose content spells one is dropped, so that
// rendered text never contains a control token it did not intend.
constexpr std::array<std::string_view, 6> kControlTokens{"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                                         "<think>",       "</think>",     "<|mask|>"};

enum class Format { kJsonArray, kJsonLines };

struct Entry {
  const json& value;
  size_t index;  // position in the file (0-based)
  std::string where;
};

// Makes the messages of one entry; returns false to skip it (counted, not an error).
using Converter = bool (*)(const Entry& entry, std::vector<Message>& messages, std::string& id_suffix,
                           const CorpusOptions& options, uint64_t& rng);

// False for entries of a file that belong to another split (counted as excluded).
using Filter = bool (*)(const Entry& entry);

struct SourceSpec {
  std::string_view name;
  Domain domain;
  std::string_view file;  // relative to the data directory
  Format format;
  Converter convert;
  Filter include = nullptr;  // nullptr: every entry
};

std::string trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

const std::string& string_field(const Entry& entry, const char* key) {
  if (!entry.value.is_object() || !entry.value.contains(key) || !entry.value[key].is_string()) {
    throw Error(entry.where + ": record has no \"" + key + "\" string");
  }
  return entry.value[key].get_ref<const std::string&>();
}

std::string optional_string(const Entry& entry, const char* key) {
  if (!entry.value.is_object() || !entry.value.contains(key) || entry.value[key].is_null()) return {};
  if (!entry.value[key].is_string()) throw Error(entry.where + ": \"" + key + "\" is not a string");
  return entry.value[key].get<std::string>();
}

// The record's own id (a string or an integer), else its position in the file.
std::string id_field(const Entry& entry, const char* key) {
  if (entry.value.is_object() && entry.value.contains(key)) {
    const json& value = entry.value[key];
    if (value.is_string() && !value.get_ref<const std::string&>().empty()) return value.get<std::string>();
    if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  }
  return std::to_string(entry.index);
}

// Instruction and optional input make the user turn.
std::string user_turn(std::string_view instruction, std::string_view input) {
  std::string user = trim(instruction);
  const std::string extra = trim(input);
  if (!extra.empty()) user += "\n\n" + extra;
  return user;
}

bool single_turn(std::vector<Message>& messages, std::string user, std::string assistant) {
  if (user.empty() || assistant.empty()) return false;
  messages = {{"user", std::move(user)}, {"assistant", std::move(assistant)}};
  return true;
}

std::string with_math_instruction(std::string problem, const CorpusOptions& options, uint64_t& rng) {
  const double u = static_cast<double>(splitmix64(rng) >> 11) * 0x1.0p-53;
  if (u < options.math_instruction_fraction) problem += "\n" + std::string(kMathInstruction);
  return problem;
}

// GSM8K answers carry calculator annotations ("48/2 = <<48/2=24>>24") and end with "#### 72";
// the annotations go and the final line becomes a boxed answer like MATH's.
std::string gsm8k_answer(std::string_view answer) {
  std::string out;
  for (size_t i = 0; i < answer.size();) {
    if (answer.compare(i, 2, "<<") == 0) {
      const size_t close = answer.find(">>", i + 2);
      if (close != std::string_view::npos) {
        i = close + 2;
        continue;
      }
    }
    out += answer[i++];
  }
  const size_t mark = out.rfind("####");
  if (mark != std::string::npos) {
    const std::string final_answer = trim(std::string_view(out).substr(mark + 4));
    out = trim(std::string_view(out).substr(0, mark));
    if (!final_answer.empty()) out += "\nThe answer is $\\boxed{" + final_answer + "}$.";
  }
  return trim(out);
}

bool convert_gsm8k(const Entry& e, std::vector<Message>& m, std::string& id, const CorpusOptions& o, uint64_t& rng) {
  id = std::to_string(e.index);
  return single_turn(m, with_math_instruction(trim(string_field(e, "question")), o, rng),
                     gsm8k_answer(string_field(e, "answer")));
}

bool convert_math(const Entry& e, std::vector<Message>& m, std::string& id, const CorpusOptions& o, uint64_t& rng) {
  id = id_field(e, "idx");
  return single_turn(m, with_math_instruction(trim(string_field(e, "problem")), o, rng),
                     trim(string_field(e, "solution")));
}

// instruction / input / <answer_key> records (GPTeacher, Code Alpaca, rasbt).
template <const char* kAnswerKey>
bool convert_instruction(const Entry& e, std::vector<Message>& m, std::string& id, const CorpusOptions&, uint64_t&) {
  id = std::to_string(e.index);
  return single_turn(m, user_turn(string_field(e, "instruction"), optional_string(e, "input")),
                     trim(string_field(e, kAnswerKey)));
}
constexpr char kResponse[] = "response";
constexpr char kOutput[] = "output";

int64_t mbpp_task_id(const Entry& e) {
  if (!e.value.is_object() || !e.value.contains("task_id")) throw Error(e.where + ": record has no \"task_id\"");
  const json& value = e.value["task_id"];
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_string()) {
    try {
      return std::stoll(value.get<std::string>());
    } catch (const std::exception&) {
    }
  }
  throw Error(e.where + ": \"task_id\" is not an integer");
}

std::string without_carriage_returns(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out += text[i];
  }
  return out;
}

bool in_mbpp_train_split(const Entry& e) {
  const int64_t task = mbpp_task_id(e);
  return task >= kMbppFirstTrainTask && task <= kMbppLastTrainTask;
}

bool convert_mbpp(const Entry& e, std::vector<Message>& m, std::string& id, const CorpusOptions&, uint64_t&) {
  if (!in_mbpp_train_split(e)) return false;  // also checked by the filter; kept for safety
  id = std::to_string(mbpp_task_id(e));
  std::string user = trim(string_field(e, "text"));
  if (e.value.contains("test_list") && e.value["test_list"].is_array() && !e.value["test_list"].empty()) {
    user += "\nYour code should pass these tests:\n";
    for (const json& test : e.value["test_list"]) {
      if (test.is_string()) user += "\n" + test.get<std::string>();
    }
  }
  const std::string code = trim(without_carriage_returns(string_field(e, "code")));
  if (code.empty()) return false;
  return single_turn(m, std::move(user), "```python\n" + code + "\n```");
}

bool convert_self_instruct(const Entry& e, std::vector<Message>& m, std::string& id, const CorpusOptions&, uint64_t&) {
  id = id_field(e, "id");
  if (!e.value.contains("instances") || !e.value["instances"].is_array() || e.value["instances"].empty()) return false;
  const json& instance = e.value["instances"][0];  // every seed task has exactly one
  if (!instance.is_object()) return false;
  return single_turn(m, user_turn(string_field(e, "instruction"), instance.value("input", std::string())),
                     trim(instance.value("output", std::string())));
}

// HH-RLHF: "\n\nHuman: ...\n\nAssistant: ..." dialogues; the "chosen" side, kept multi-turn.
// Consecutive turns of one speaker are joined; a trailing user turn is dropped.
bool convert_hh(const Entry& e, std::vector<Message>& m, std::string& id, const CorpusOptions&, uint64_t&) {
  id = std::to_string(e.index);
  const std::string& dialogue = string_field(e, "chosen");
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 2> kMarkers{
      {{"\n\nHuman: ", "user"}, {"\n\nAssistant: ", "assistant"}}};
  struct Cut {
    size_t at, content;
    std::string_view role;
  };
  std::vector<Cut> cuts;
  for (const auto& [marker, role] : kMarkers) {
    for (size_t at = dialogue.find(marker); at != std::string::npos; at = dialogue.find(marker, at + 1)) {
      cuts.push_back({at, at + marker.size(), role});
    }
  }
  std::sort(cuts.begin(), cuts.end(), [](const Cut& a, const Cut& b) { return a.at < b.at; });
  if (cuts.empty() || !trim(std::string_view(dialogue).substr(0, cuts[0].at)).empty()) return false;
  m.clear();
  for (size_t i = 0; i < cuts.size(); ++i) {
    const size_t end = i + 1 < cuts.size() ? cuts[i + 1].at : dialogue.size();
    const std::string content = trim(std::string_view(dialogue).substr(cuts[i].content, end - cuts[i].content));
    if (content.empty()) return false;
    if (!m.empty() && m.back().role == cuts[i].role) {
      m.back().content += "\n\n" + content;
    } else {
      m.push_back({std::string(cuts[i].role), content});
    }
  }
  while (!m.empty() && m.back().role != "assistant") m.pop_back();
  return !m.empty() && m.front().role == "user";
}

const std::array<SourceSpec, 9> kSources{{
    {"gsm8k-train", Domain::kMath, "math/gsm8k/train.jsonl", Format::kJsonLines, convert_gsm8k},
    {"math-train", Domain::kMath, "math/math_train/train.jsonl", Format::kJsonLines, convert_math},
    {"gpteacher-codegen", Domain::kCode, "code/gpteacher_codegen/codegen-instruct.json", Format::kJsonArray,
     convert_instruction<kResponse>},
    {"code-alpaca-2k", Domain::kCode, "code/code_alpaca_2k/code_alpaca_2k.json", Format::kJsonArray,
     convert_instruction<kOutput>},
    {"mbpp-train", Domain::kCode, "code/mbpp/mbpp.jsonl", Format::kJsonLines, convert_mbpp, in_mbpp_train_split},
    {"gpteacher-roleplay", Domain::kChat, "chat/gpteacher_roleplay/roleplay-simple-deduped-roleplay-instruct.json",
     Format::kJsonArray, convert_instruction<kResponse>},
    {"rasbt-instruction", Domain::kChat, "chat/rasbt_instruction_data/instruction-data.json", Format::kJsonArray,
     convert_instruction<kOutput>},
    {"hh-rlhf-harmless", Domain::kChat, "chat/hh_rlhf_harmless_base/test.jsonl", Format::kJsonLines, convert_hh},
    {"self-instruct-seed", Domain::kChat, "chat/self_instruct/seed_tasks.jsonl", Format::kJsonLines,
     convert_self_instruct},
}};

constexpr std::string_view kPythonSource = "python-stdlib";

bool is_eval_path(std::string_view relative) {
  return std::any_of(kEvalPaths.begin(), kEvalPaths.end(), [&](std::string_view eval) {
    return eval.back() == '/' ? relative.starts_with(eval) : relative == eval;
  });
}

std::string read_file(const fs::path& file, const char* what) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open " + what);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw Error(file.string() + ": cannot read " + what);
  return std::move(contents).str();
}

bool mentions_control_token(std::string_view text) {
  return std::any_of(kControlTokens.begin(), kControlTokens.end(),
                     [&](std::string_view token) { return text.find(token) != std::string_view::npos; });
}

bool mentions_control_token(const Record& record) {
  if (record.is_raw_text()) return mentions_control_token(record.text);
  return std::any_of(record.messages.begin(), record.messages.end(),
                     [](const Message& m) { return mentions_control_token(m.content); });
}

// Content identity for deduplication (roles and contents, or the raw text).
std::string content_key(const Record& record) {
  if (record.is_raw_text()) return "T" + record.text;
  std::string key;
  for (const Message& m : record.messages) {
    key += m.role;
    key += '\x1f';
    key += m.content;
    key += '\x1e';
  }
  return key;
}

// Exact-content deduplication across all sources (so valid never repeats a train record).
class Deduplicator {
 public:
  // False when an identical record was seen before.
  bool first_time(const Record& record) { return seen_.insert(content_key(record)).second; }

 private:
  std::unordered_set<std::string> seen_;
};

std::vector<Record> read_source(const SourceSpec& spec, const CorpusOptions& options, SourceStats& stats,
                                Deduplicator& dedup) {
  const fs::path file = options.data_dir / spec.file;
  const std::string contents = read_file(file, "data file");
  uint64_t rng = stream_seed(options.seed, std::string("instruction/") + std::string(spec.name));
  std::vector<Record> records;
  auto take = [&](const json& value, size_t index, std::string where) {
    Record record;
    record.domain = spec.domain;
    record.source = spec.name;
    std::string id_suffix;
    const Entry entry{value, index, std::move(where)};
    if (spec.include && !spec.include(entry)) {
      ++stats.excluded;
      return;
    }
    bool usable;
    try {
      usable = spec.convert(entry, record.messages, id_suffix, options, rng) && !mentions_control_token(record);
    } catch (const json::exception& e) {
      throw Error(entry.where + ": unexpected value (" + e.what() + ")");
    }
    if (!usable) {
      ++stats.skipped;
      return;
    }
    ++stats.read;
    record.id = std::string(spec.name) + "/" + id_suffix;
    if (!dedup.first_time(record)) {
      ++stats.duplicates;
      return;
    }
    records.push_back(std::move(record));
  };
  try {
    if (spec.format == Format::kJsonArray) {
      const json document = json::parse(contents);
      if (!document.is_array()) throw Error(file.string() + ": expected a JSON array of records");
      for (size_t i = 0; i < document.size(); ++i) take(document[i], i, file.string() + ": record " + std::to_string(i));
    } else {
      size_t start = 0, line_number = 0, index = 0;
      while (start < contents.size()) {
        size_t end = contents.find('\n', start);
        if (end == std::string::npos) end = contents.size();
        ++line_number;
        const std::string_view line(contents.data() + start, end - start);
        if (!trim(line).empty()) {
          const std::string where = file.string() + ":" + std::to_string(line_number);
          json value;
          try {
            value = json::parse(line);
          } catch (const json::exception& e) {
            throw Error(where + ": not valid JSON (" + e.what() + ")");
          }
          take(value, index++, where);
        }
        start = end + 1;
      }
    }
  } catch (const json::exception& e) {
    throw Error(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  return records;
}

// ---------------------------------------------------------------------------------------------
// Python standard library

bool excluded_stdlib_dir(const std::string& name) {
  static const std::array<std::string_view, 8> kExcluded{"test",        "tests",    "site-packages", "dist-packages",
                                                         "idlelib",     "encodings", "__pycache__",  "pydoc_data"};
  return name.starts_with("config-") || name.starts_with(".") ||
         std::find(kExcluded.begin(), kExcluded.end(), name) != kExcluded.end();
}

struct PyFile {
  std::string relative;
  uintmax_t size;
};

std::vector<PyFile> list_stdlib_files(const fs::path& root, size_t max_file_bytes, size_t& skipped) {
  std::vector<PyFile> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) throw Error(root.string() + ": cannot list the Python standard library (" + ec.message() + ")");
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      if (excluded_stdlib_dir(name)) it.disable_recursion_pending();
      continue;
    }
    if (entry.is_symlink(ec) || !entry.is_regular_file(ec) || entry.path().extension() != ".py") continue;
    if (name.starts_with("test_") || name.starts_with("_sysconfigdata")) continue;  // test modules, generated data
    const uintmax_t size = entry.file_size(ec);
    if (ec || size == 0) continue;
    if (size > max_file_bytes) {
      ++skipped;
      continue;
    }
    files.push_back({fs::relative(entry.path(), root).generic_string(), size});
  }
  std::sort(files.begin(), files.end(), [](const PyFile& a, const PyFile& b) { return a.relative < b.relative; });
  return files;
}

std::vector<Record> read_python_stdlib(const fs::path& root, size_t cap, const CorpusOptions& options,
                                       SourceStats& stats, Deduplicator& dedup) {
  std::vector<PyFile> files = list_stdlib_files(root, options.python_max_file_bytes, stats.skipped);
  uint64_t rng = stream_seed(options.seed, "select/python-stdlib");
  shuffle(files, rng);
  std::vector<Record> records;
  size_t total = 0;
  for (const PyFile& file : files) {
    if (total + file.size > cap) continue;  // a smaller file may still fit
    std::string text = read_file(root / file.relative, "Python source file");
    if (tokenizer::find_invalid_utf8(text) || text.find('\0') != std::string::npos || mentions_control_token(text) ||
        trim(text).empty()) {
      ++stats.skipped;
      continue;
    }
    Record record;
    record.domain = Domain::kCode;
    record.source = kPythonSource;
    record.id = std::string(kPythonSource) + "/" + file.relative;
    record.text = std::move(text);
    ++stats.read;
    if (!dedup.first_time(record)) {
      ++stats.duplicates;
      continue;
    }
    total += record.text.size();
    records.push_back(std::move(record));
  }
  return records;
}

std::optional<fs::path> ask_python3() {
  FILE* pipe = popen("python3 -c 'import sysconfig;print(sysconfig.get_paths()[\"stdlib\"])' 2>/dev/null", "r");
  if (!pipe) return std::nullopt;
  std::string out;
  char buffer[512];
  while (const size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  const std::string path = trim(out);
  if (status != 0 || path.empty()) return std::nullopt;
  return fs::path(path);
}

bool looks_like_stdlib(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "os.py", ec) && fs::is_regular_file(dir / "json" / "__init__.py", ec);
}

// ---------------------------------------------------------------------------------------------
// Split

size_t valid_count(size_t n, const CorpusOptions& options) {
  const auto by_fraction = static_cast<size_t>(std::ceil(options.valid_fraction * static_cast<double>(n)));
  return std::min(std::max(by_fraction, options.min_valid_per_source), n / 2);
}

void add_to(SplitStats& stats, const Record& record) {
  ++stats.records;
  stats.bytes += record.content_bytes();
}

nlohmann::ordered_json split_stats_json(const SplitStats& s) {
  return nlohmann::ordered_json{{"records", s.records}, {"bytes", s.bytes}};
}

}  // namespace

std::string_view domain_name(Domain domain) {
  switch (domain) {
    case Domain::kMath:
      return "math";
    case Domain::kCode:
      return "code";
    case Domain::kChat:
      return "chat";
  }
  return "?";
}

Domain parse_domain(std::string_view name, const std::string& origin) {
  if (name == "math") return Domain::kMath;
  if (name == "code") return Domain::kCode;
  if (name == "chat") return Domain::kChat;
  throw Error(origin + ": unknown domain '" + std::string(name) + "' (expected math, code or chat)");
}

size_t Record::content_bytes() const {
  if (is_raw_text()) return text.size();
  size_t bytes = 0;
  for (const Message& m : messages) bytes += m.content.size();
  return bytes;
}

std::map<std::string, SplitStats> Corpus::domain_stats(bool valid_split) const {
  std::map<std::string, SplitStats> stats;
  for (const Domain d : {Domain::kMath, Domain::kCode, Domain::kChat}) stats[std::string(domain_name(d))];
  for (const Record& r : valid_split ? valid : train) add_to(stats[std::string(domain_name(r.domain))], r);
  return stats;
}

std::optional<fs::path> find_python_stdlib() {
  if (auto dir = ask_python3(); dir && looks_like_stdlib(*dir)) return dir;
  std::vector<fs::path> candidates;
  std::error_code ec;
  for (const fs::path& base : {fs::path("/usr/lib"), fs::path("/usr/local/lib")}) {
    for (const auto& entry : fs::directory_iterator(base, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("python3.") && looks_like_stdlib(entry.path())) candidates.push_back(entry.path());
    }
  }
  if (candidates.empty()) return std::nullopt;
  std::sort(candidates.begin(), candidates.end());
  return candidates.back();
}

Corpus build_corpus(const CorpusOptions& options) {
  if (!(options.valid_fraction >= 0.0 && options.valid_fraction < 0.5)) {
    throw Error("valid fraction " + std::to_string(options.valid_fraction) + " is not in [0, 0.5)");
  }
  if (!fs::is_directory(options.data_dir)) {
    throw Error(options.data_dir.string() + ": data directory not found (expected shared/data)");
  }
  Corpus corpus;
  corpus.seed = options.seed;
  corpus.valid_fraction = options.valid_fraction;
  corpus.data_dir = options.data_dir;
  Deduplicator dedup;
  std::vector<std::vector<Record>> per_source;
  size_t code_conversation_bytes = 0;
  for (const SourceSpec& spec : kSources) {
    DSPARK_ASSERT(!is_eval_path(spec.file));
    SourceStats stats;
    stats.name = spec.name;
    stats.domain = spec.domain;
    stats.file = spec.file;
    per_source.push_back(read_source(spec, options, stats, dedup));
    if (spec.domain == Domain::kCode) {
      for (const Record& r : per_source.back()) code_conversation_bytes += r.content_bytes();
    }
    corpus.sources.push_back(std::move(stats));
  }

  corpus.python_stdlib_cap = options.python_stdlib_bytes.value_or(code_conversation_bytes);
  if (corpus.python_stdlib_cap > 0) {
    std::optional<fs::path> root = options.python_stdlib_dir;
    if (!root) root = find_python_stdlib();
    if (!root) {
      throw Error(
          "no Python standard library found (python3 or /usr/lib/python3.*); pass its directory or set "
          "the Python byte budget to 0");
    }
    if (!fs::is_directory(*root)) throw Error(root->string() + ": Python standard library directory not found");
    corpus.python_stdlib_dir = *root;
    SourceStats stats;
    stats.name = kPythonSource;
    stats.domain = Domain::kCode;
    stats.file = root->string();
    per_source.push_back(read_python_stdlib(*root, corpus.python_stdlib_cap, options, stats, dedup));
    corpus.sources.push_back(std::move(stats));
  }

  for (size_t s = 0; s < per_source.size(); ++s) {
    std::vector<Record>& records = per_source[s];
    SourceStats& stats = corpus.sources[s];
    uint64_t rng = stream_seed(options.seed, "split/" + stats.name);
    shuffle(records, rng);
    const size_t n_valid = valid_count(records.size(), options);
    for (size_t i = 0; i < records.size(); ++i) {
      const bool is_valid = i < n_valid;
      add_to(is_valid ? stats.valid : stats.train, records[i]);
      (is_valid ? corpus.valid : corpus.train).push_back(std::move(records[i]));
    }
  }
  uint64_t rng = stream_seed(options.seed, "shuffle/train");
  shuffle(corpus.train, rng);
  rng = stream_seed(options.seed, "shuffle/valid");
  shuffle(corpus.valid, rng);
  return corpus;
}

std::string record_to_json(const Record& record) {
  nlohmann::ordered_json j;  // keys in a fixed, readable order
  j["domain"] = domain_name(record.domain);
  j["source"] = record.source;
  j["id"] = record.id;
  if (record.is_raw_text()) {
    j["text"] = record.text;
  } else {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const Message& m : record.messages) {
      nlohmann::ordered_json message;
      message["role"] = m.role;
      message["content"] = m.content;
      messages.push_back(std::move(message));
    }
    j["messages"] = std::move(messages);
  }
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error("corpus record " + record.id + ": cannot be written as JSON (" + e.what() + ")");
  }
}

Record parse_record(std::string_view line, const std::string& origin) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(origin + ": a corpus record is not a JSON object");
  auto string_of = [&](const json& node, const char* key) -> std::string {
    if (!node.contains(key) || !node[key].is_string()) throw Error(origin + ": record has no \"" + key + "\" string");
    return node[key].get<std::string>();
  };
  Record record;
  record.domain = parse_domain(string_of(j, "domain"), origin);
  record.source = string_of(j, "source");
  record.id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : std::string();
  if (j.contains("messages")) {
    if (!j["messages"].is_array() || j["messages"].empty()) throw Error(origin + ": \"messages\" is not a non-empty array");
    for (const json& m : j["messages"]) {
      if (!m.is_object()) throw Error(origin + ": a message is not a JSON object");
      record.messages.push_back({string_of(m, "role"), string_of(m, "content")});
    }
  } else {
    record.text = string_of(j, "text");
    if (record.text.empty()) throw Error(origin + ": record has an empty \"text\"");
  }
  return record;
}

void for_each_record(const fs::path& file, const std::function<void(Record&&)>& on_record) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open corpus file");
  std::string line;
  for (size_t line_number = 1; std::getline(in, line); ++line_number) {
    if (line.empty()) continue;
    on_record(parse_record(line, file.string() + ":" + std::to_string(line_number)));
  }
}

std::vector<Record> read_records(const fs::path& file) {
  std::vector<Record> records;
  for_each_record(file, [&](Record&& r) { records.push_back(std::move(r)); });
  return records;
}

std::vector<std::string> first_user_turns(const fs::path& file, int64_t limit) {
  std::vector<std::string> turns;
  for_each_record(file, [&](Record&& r) {
    if (r.is_raw_text() || (limit > 0 && static_cast<int64_t>(turns.size()) >= limit)) return;
    for (const Message& m : r.messages)
      if (m.role == "user") {
        turns.push_back(m.content);
        return;
      }
  });
  if (turns.empty()) throw Error(file.string() + ": no conversations");
  return turns;
}

void write_corpus(const Corpus& corpus, const fs::path& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(out_dir.string() + ": cannot create the corpus directory (" + ec.message() + ")");
  auto write_split = [&](const std::vector<Record>& records, const char* name) {
    const fs::path file = out_dir / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(file.string() + ": cannot open for writing");
    for (const Record& r : records) out << record_to_json(r) << '\n';
    out.flush();
    if (!out) throw Error(file.string() + ": write failed");
  };
  write_split(corpus.train, "train.jsonl");
  write_split(corpus.valid, "valid.jsonl");

  ojson splits = ojson::object();
  for (const bool valid : {false, true}) {
    ojson per_domain = ojson::object();
    SplitStats total;
    for (const auto& [name, s] : corpus.domain_stats(valid)) {
      per_domain[name] = split_stats_json(s);
      total.records += s.records;
      total.bytes += s.bytes;
    }
    per_domain["total"] = split_stats_json(total);
    splits[valid ? "valid" : "train"] = std::move(per_domain);
  }
  ojson sources = ojson::array();
  for (const SourceStats& s : corpus.sources) {
    sources.push_back(ojson{{"name", s.name},
                           {"domain", domain_name(s.domain)},
                           {"file", s.file},
                           {"read", s.read},
                           {"duplicates", s.duplicates},
                           {"excluded", s.excluded},
                           {"skipped", s.skipped},
                           {"train", split_stats_json(s.train)},
                           {"valid", split_stats_json(s.valid)}});
  }
  const ojson stats{{"seed", corpus.seed},
                   {"valid_fraction", corpus.valid_fraction},
                   {"data_dir", corpus.data_dir.string()},
                   {"python_stdlib_dir", corpus.python_stdlib_dir.string()},
                   {"python_stdlib_cap_bytes", corpus.python_stdlib_cap},
                   {"bytes_are", "UTF-8 bytes of message contents / raw text, without chat formatting"},
                   {"splits", std::move(splits)},
                   {"sources", std::move(sources)}};
  const fs::path file = out_dir / "stats.json";
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file.string() + ": cannot open for writing");
  out << stats.dump(2) << '\n' << std::flush;  // a full disk shows at the flush
  if (!out) throw Error(file.string() + ": write failed");
}

RenderedRecord render_record(const Record& record) {
  RenderedRecord out;
  if (record.is_raw_text()) {
    out.text = record.text;
    out.text += kEndOfText;
    out.trained_spans.emplace_back(0, out.text.size());
    return out;
  }
  const tokenizer::ChatOptions generation_prompt{.add_generation_prompt = true, .enable_thinking = false};
  const tokenizer::ChatOptions turn_only{.add_generation_prompt = false};
  for (const Message& m : record.messages) {
    if (m.role == "assistant") {
      out.text += tokenizer::render_chatml({}, generation_prompt);
      const size_t start = out.text.size();
      out.text += m.content;
      out.text += kImEnd;
      out.trained_spans.emplace_back(start, out.text.size());
      out.text += '\n';
    } else {
      out.text += tokenizer::render_chatml({tokenizer::ChatMessage{m.role, m.content}}, turn_only);
    }
  }
  return out;
}

}  // namespace dspark::train
