// Training corpus for the target model and the tokenizer: the train-only files of shared/data (see
// shared/data/SOURCES.md) turned into conversations in three domains (math, code, chat), plus raw
// Python source from the machine's own standard library as a code-domain text source.
//
// The split of shared/data is fixed here and nowhere else: only the files and MBPP task ids listed
// in corpus.cpp (kSources) are ever opened; the eval files are never read.
//
// Every record is one line of train.jsonl / valid.jsonl:
//   {"domain":"math","source":"gsm8k-train","id":"gsm8k-train/12","messages":[{"role":"user",...},...]}
//   {"domain":"code","source":"python-stdlib","id":"python-stdlib/json/decoder.py","text":"..."}
// The build is deterministic for a seed: records are deduplicated (exact content), a validation
// slice is drawn per source (so every domain has one), and both splits are shuffled.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dspark::train {

enum class Domain { kMath, kCode, kChat };

std::string_view domain_name(Domain domain);
// "math" | "code" | "chat"; throws dspark::Error naming `origin` otherwise.
Domain parse_domain(std::string_view name, const std::string& origin);

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
  bool operator==(const Message&) const = default;
};

struct Record {
  Domain domain = Domain::kChat;
  std::string source;              // e.g. "gsm8k-train", "mbpp-train", "python-stdlib"
  std::string id;                  // unique within the corpus: "<source>/<index, task id or path>"
  std::vector<Message> messages;   // a conversation (user turn first, ends with an assistant turn) ...
  std::string text;                // ... or raw text when `messages` is empty
  bool is_raw_text() const { return messages.empty(); }
  // Bytes of content (message contents or the raw text), without any formatting.
  size_t content_bytes() const;
};

struct CorpusOptions {
  std::filesystem::path data_dir;  // shared/data
  uint64_t seed = 1234;
  double valid_fraction = 0.02;    // per source, rounded up ...
  size_t min_valid_per_source = 8; // ... but at least this many (and at most half the source)
  // Raw Python standard library source, in bytes. nullopt: as many bytes as the code-instruction
  // conversations have; 0: none.
  std::optional<size_t> python_stdlib_bytes;
  // Where the standard library is; nullopt: ask python3, then look in /usr/lib/python3.*.
  std::optional<std::filesystem::path> python_stdlib_dir;
  size_t python_max_file_bytes = 200'000;  // larger files (generated tables, docs dumps) are skipped
  // Math problems whose user turn gets the "reason step by step ... \boxed{}" instruction appended
  // (the rest are kept bare so both phrasings are seen).
  double math_instruction_fraction = 0.5;
};

struct SplitStats {
  size_t records = 0;
  size_t bytes = 0;  // content bytes
};

struct SourceStats {
  std::string name;
  Domain domain = Domain::kChat;
  std::string file;       // relative to the data directory (or the stdlib directory)
  size_t read = 0;        // records made from the file
  size_t excluded = 0;    // entries of another split (MBPP tasks 1-600), never converted
  size_t duplicates = 0;  // dropped as exact copies of an earlier record
  size_t skipped = 0;     // unusable entries (empty answer, malformed dialogue, excluded file)
  SplitStats train, valid;
};

struct Corpus {
  std::vector<Record> train, valid;
  std::vector<SourceStats> sources;  // in kSources order, python-stdlib last
  uint64_t seed = 0;
  double valid_fraction = 0;
  std::filesystem::path data_dir, python_stdlib_dir;
  size_t python_stdlib_cap = 0;

  // Totals per domain ("math", "code", "chat") of one split.
  std::map<std::string, SplitStats> domain_stats(bool valid_split) const;
};

// Reads the train-only sources of `options.data_dir` (and the Python standard library) and splits
// them. Throws dspark::Error naming the file for a missing or malformed source.
Corpus build_corpus(const CorpusOptions& options);

// Writes train.jsonl, valid.jsonl and stats.json into `out_dir` (created if needed).
void write_corpus(const Corpus& corpus, const std::filesystem::path& out_dir);

// One JSONL line (without the newline) and back. parse_record throws dspark::Error naming `origin`.
std::string record_to_json(const Record& record);
Record parse_record(std::string_view line, const std::string& origin);

// Calls on_record(Record&&) for each line of a train.jsonl / valid.jsonl file.
void for_each_record(const std::filesystem::path& file, const std::function<void(Record&&)>& on_record);
std::vector<Record> read_records(const std::filesystem::path& file);
// The first user turn of each conversation of a train.jsonl / valid.jsonl file, at most `limit`
// of them (0: all); raw-text records are skipped. Throws dspark::Error naming the file when none.
std::vector<std::string> first_user_turns(const std::filesystem::path& file, int64_t limit);

// The standard library directory of the machine's Python 3, or nullopt when none is found.
std::optional<std::filesystem::path> find_python_stdlib();

// ---------------------------------------------------------------------------------------------
// Rendering a record to the text a model trains on.

inline constexpr std::string_view kEndOfText = "<|endoftext|>";
inline constexpr std::string_view kImEnd = "<|im_end|>";

struct RenderedRecord {
  std::string text;
  // [start, end) byte ranges of `text` the model learns to produce: each assistant turn's content
  // followed by its <|im_end|>; for raw text, the whole text and its <|endoftext|>.
  std::vector<std::pair<size_t, size_t>> trained_spans;
};

// Conversations become ChatML. Each assistant turn is written exactly as the chat template's
// generation prompt in the non-thinking form, "<|im_start|>assistant\n<think>\n\n</think>\n\n"
// (tokenizer::render_chatml), followed by the content and "<|im_end|>\n". So the text up to an
// assistant turn is what `dspark generate --chat` feeds the model for a single-turn prompt.
// Raw text is written as is, followed by <|endoftext|>.
RenderedRecord render_record(const Record& record);

}  // namespace dspark::train
