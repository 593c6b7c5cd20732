#include "train/token_dataset.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace dspark::train {

void TokenStream::append(const tokenizer::Tokenizer& tok, const Record& record) {
  const RenderedRecord rendered = render_record(record);
  auto add = [&](size_t begin, size_t end, bool is_trained) {
    if (begin >= end) return;
    const std::vector<int32_t> piece = tok.encode(std::string_view(rendered.text).substr(begin, end - begin));
    ids.insert(ids.end(), piece.begin(), piece.end());
    trained.insert(trained.end(), piece.size(), is_trained ? 1 : 0);
  };
  size_t pos = 0;
  for (const auto& [begin, end] : rendered.trained_spans) {
    add(pos, begin, false);
    add(begin, end, true);
    pos = end;
  }
  add(pos, rendered.text.size(), false);
  ++records;
}

size_t TokenStream::trained_tokens() const { return static_cast<size_t>(std::count(trained.begin(), trained.end(), 1)); }

int64_t TokenStream::n_windows(int64_t seq_len) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  return n <= seq_len ? 0 : (n - 1) / seq_len;
}

TokenizedCorpus tokenize_corpus(const tokenizer::Tokenizer& tok, const std::filesystem::path& corpus_dir) {
  TokenizedCorpus out;
  for (const char* file : {"train.jsonl", "valid.jsonl"})
    if (!std::filesystem::exists(corpus_dir / file))
      throw Error((corpus_dir / file).string() + ": not found (make the corpus with `dspark data corpus --out DIR`)");
  for_each_record(corpus_dir / "train.jsonl", [&](Record&& r) { out.train.append(tok, r); });
  for_each_record(corpus_dir / "valid.jsonl",
                  [&](Record&& r) { out.valid[std::string(domain_name(r.domain))].append(tok, r); });
  return out;
}

TokenBatch make_batch(const TokenStream& stream, const std::vector<int64_t>& windows, int64_t seq_len) {
  const int64_t batch = static_cast<int64_t>(windows.size());
  torch::Tensor inputs = torch::empty({batch, seq_len}, torch::kLong);
  torch::Tensor targets = torch::empty({batch, seq_len}, torch::kLong);
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* tg = targets.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const size_t start = static_cast<size_t>(windows[b] * seq_len);
    DSPARK_ASSERT(start + seq_len < stream.ids.size());
    for (int64_t t = 0; t < seq_len; ++t) {
      in[b * seq_len + t] = stream.ids[start + t];
      tg[b * seq_len + t] = stream.trained[start + t + 1] ? stream.ids[start + t + 1] : kIgnoreTarget;
    }
  }
  return {inputs, targets};
}

const std::vector<int64_t>& WindowSchedule::epoch_order(int64_t epoch) {
  if (epoch != cached_epoch_) {
    order_.resize(n_windows_);
    std::iota(order_.begin(), order_.end(), 0);
    std::mt19937_64 rng(seed_ * 1000003u + static_cast<uint64_t>(epoch));
    // Fisher-Yates with our own index draw: std::shuffle's draws are implementation-defined.
    for (int64_t i = n_windows_ - 1; i > 0; --i) std::swap(order_[i], order_[rng() % static_cast<uint64_t>(i + 1)]);
    cached_epoch_ = epoch;
  }
  return order_;
}

std::vector<int64_t> WindowSchedule::windows_of_step(int64_t step, int64_t batch_size) {
  DSPARK_ASSERT(n_windows_ > 0);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < batch_size; ++i) {
    const int64_t flat = step * batch_size + i;
    out.push_back(epoch_order(flat / n_windows_)[flat % n_windows_]);
  }
  return out;
}

}  // namespace dspark::train
