// Token streams for language-model training: corpus records rendered (train::render_record),
// tokenized, and packed back to back into one stream per split (and per domain for validation),
// with a per-token flag saying whether the model learns to predict that token.
//
// Each trained span is tokenized on its own, so a response starts on a token boundary exactly as
// it does at inference, when the prompt (ending in the generation prompt) is encoded separately.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "tokenizer/tokenizer.h"
#include "train/corpus.h"

namespace dspark::train {

struct TokenStream {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;  // [ids.size()] 1 where the token is a training target
  size_t records = 0;

  void append(const tokenizer::Tokenizer& tok, const Record& record);
  size_t trained_tokens() const;
  // Windows of seq_len + 1 tokens (inputs and next-token targets) starting every seq_len tokens.
  int64_t n_windows(int64_t seq_len) const;
};

// Streams of a corpus directory made by `dspark data corpus`: train.jsonl as one stream, and
// valid.jsonl split by domain ("math", "code", "chat").
struct TokenizedCorpus {
  TokenStream train;
  std::map<std::string, TokenStream> valid;
};
TokenizedCorpus tokenize_corpus(const tokenizer::Tokenizer& tok, const std::filesystem::path& corpus_dir);

// One batch of windows: inputs [batch, seq_len] int64, targets [batch, seq_len] int64 with
// untrained positions set to kIgnoreTarget.
inline constexpr int64_t kIgnoreTarget = -100;
struct TokenBatch {
  torch::Tensor inputs, targets;
};
TokenBatch make_batch(const TokenStream& stream, const std::vector<int64_t>& windows, int64_t seq_len);

// The window order of a run: epoch e is a permutation of all windows drawn from (seed, e), and the
// order continues across epochs, so the windows of any step are known from the step alone (which
// is what makes resuming exact).
class WindowSchedule {
 public:
  WindowSchedule(int64_t n_windows, uint64_t seed) : n_windows_(n_windows), seed_(seed) {}
  std::vector<int64_t> windows_of_step(int64_t step, int64_t batch_size);

 private:
  const std::vector<int64_t>& epoch_order(int64_t epoch);
  int64_t n_windows_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace dspark::train
