// Byte-level BPE trainer producing a Qwen2/Qwen3-style Hugging Face tokenizer (tokenizer.json and
// tokenizer_config.json) that dspark::tokenizer::Tokenizer and ChatTemplate load.
//
// Training follows the tokenizer it writes: added tokens are cut out of the text first, the rest
// is NFC-normalised and split by the Qwen pre-tokenizer regex (tokenizer::PreTokenizer), and each
// distinct word is counted as a sequence of bytes. Starting from the 256 byte symbols, the most
// frequent adjacent pair is merged until the vocabulary, special tokens included, has the
// requested size. Ties go to the pair whose (left bytes, right bytes) is lexicographically
// smallest. Pair counts are updated incrementally (pair -> words index, lazy max-heap), so a merge
// costs time proportional to the words it touches, not to the corpus.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dspark::train {

// The Split pre-tokenizer pattern of the Qwen2/Qwen3 tokenizer.json (Hugging Face regex dialect).
inline constexpr std::string_view kQwenPretokenizerPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct SpecialToken {
  std::string content;
  bool special = true;  // false: an added token that decode(skip_special_tokens) keeps (Qwen3's <think>)
};

// <|endoftext|>, <|im_start|>, <|im_end|> (special), <think>, </think> (added, not special, as in
// Qwen3) and <|mask|> (special; reserved for parallel drafters), in this id order.
std::vector<SpecialToken> default_special_tokens();

struct BpeTrainerOptions {
  int32_t vocab_size = 8192;  // BPE tokens (256 bytes + merges) plus the special tokens
  std::vector<SpecialToken> special_tokens = default_special_tokens();
  int threads = 0;  // for word counting; 0: OpenMP's default
};

struct BpeProgress {
  size_t merges_done = 0;
  size_t merges_total = 0;
  double elapsed_s = 0;  // since train() started
};

struct TrainedBpe {
  std::vector<std::string> tokens;                    // bytes of each BPE token by id: 256 bytes, then merges
  std::vector<std::pair<int32_t, int32_t>> merges;    // in rank order (ids into tokens)
  std::vector<SpecialToken> special_tokens;           // ids tokens.size(), tokens.size() + 1, ...
  int32_t vocab_size() const { return static_cast<int32_t>(tokens.size() + special_tokens.size()); }
  // Id of a special token; nullopt when there is none with that content.
  std::optional<int32_t> special_id(std::string_view content) const;
};

class BpeTrainer {
 public:
  // Throws dspark::Error for a vocabulary that cannot hold the bytes and special tokens.
  explicit BpeTrainer(BpeTrainerOptions options = {});
  ~BpeTrainer();
  BpeTrainer(BpeTrainer&&) noexcept;
  BpeTrainer& operator=(BpeTrainer&&) noexcept;

  // Counts the words of each text (valid UTF-8, or dspark::Error naming the text's index), on
  // several threads. May be called repeatedly; counts accumulate.
  void count(const std::vector<std::string>& texts);
  void count(std::string_view text);

  size_t distinct_words() const;
  uint64_t total_words() const;

  // Learns the merges. Calls `progress` after each merge. Throws dspark::Error when the counted
  // words run out of pairs before the vocabulary is full (the corpus is too small).
  TrainedBpe train(const std::function<void(const BpeProgress&)>& progress = {}) const;

 private:
  struct State;
  BpeTrainerOptions options_;
  std::unique_ptr<State> state_;
};

struct TokenizerFileOptions {
  int64_t model_max_length = 32768;
};

// The ChatML chat template written to tokenizer_config.json: Qwen3's template without the tool
// parts (our vocabulary has no tool tokens), with its enable_thinking switch and reasoning
// handling, so dspark's ChatTemplate renders it exactly as the Jinja source does.
std::string_view chat_template_source();

// Writes tokenizer.json and tokenizer_config.json into `dir` (created if needed). The special
// tokens must include <|endoftext|>, <|im_start|> and <|im_end|>.
void write_tokenizer_files(const TrainedBpe& bpe, const std::filesystem::path& dir,
                           const TokenizerFileOptions& options = {});

}  // namespace dspark::train
