// dspark train tokenizer: train a byte-level BPE tokenizer on the rendered train split of a corpus
// made by `dspark data corpus`, write tokenizer.json / tokenizer_config.json, then report the
// bytes per token it achieves on the validation split, per domain.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe_trainer.h"
#include "train/corpus.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct TrainTokenizerArgs {
  std::string corpus_dir;
  std::string out_dir;
  int32_t vocab_size = 8192;
  size_t max_bytes = 0;  // 0: the whole train split
  int threads = 0;
  int64_t model_max_length = 32768;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Rendered training texts of the train split, up to `max_bytes` (records are already shuffled).
std::vector<std::string> read_training_texts(const fs::path& file, size_t max_bytes, size_t& bytes) {
  std::vector<std::string> texts;
  bytes = 0;
  bool full = false;
  train::for_each_record(file, [&](train::Record&& record) {
    if (full) return;
    std::string text = train::render_record(record).text;
    if (max_bytes > 0 && bytes + text.size() > max_bytes) {
      full = true;
      return;
    }
    bytes += text.size();
    texts.push_back(std::move(text));
  });
  return texts;
}

struct DomainEval {
  size_t records = 0;
  size_t content_bytes = 0, content_tokens = 0;    // message contents / raw text, encoded one by one
  size_t rendered_bytes = 0, rendered_tokens = 0;  // the full rendered training text
};

std::map<std::string, DomainEval> evaluate(const tokenizer::Tokenizer& tok, const fs::path& valid_file) {
  std::map<std::string, DomainEval> result;
  train::for_each_record(valid_file, [&](train::Record&& record) {
    DomainEval& e = result[std::string(train::domain_name(record.domain))];
    ++e.records;
    if (record.is_raw_text()) {
      e.content_bytes += record.text.size();
      e.content_tokens += tok.encode(record.text).size();
    }
    for (const train::Message& m : record.messages) {
      e.content_bytes += m.content.size();
      e.content_tokens += tok.encode(m.content).size();
    }
    const train::RenderedRecord rendered = train::render_record(record);
    e.rendered_bytes += rendered.text.size();
    e.rendered_tokens += tok.encode(rendered.text).size();
  });
  return result;
}

double ratio(size_t a, size_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }

void run_train_tokenizer(const TrainTokenizerArgs& args) {
  const fs::path corpus(args.corpus_dir);
  const fs::path train_file = corpus / "train.jsonl";
  if (!fs::is_regular_file(train_file)) {
    throw Error(train_file.string() + ": no train split (make one with `dspark data corpus --out DIR`)");
  }
  const auto start = Clock::now();
  train::BpeTrainerOptions options;
  options.vocab_size = args.vocab_size;
  options.threads = args.threads;
  train::BpeTrainer trainer(options);

  size_t bytes = 0;
  const std::vector<std::string> texts = read_training_texts(train_file, args.max_bytes, bytes);
  if (texts.empty()) throw Error(train_file.string() + ": no records to train on");
  std::fprintf(stderr, "train tokenizer: %zu records, %.2f MB of rendered text (%.1f s)\n", texts.size(),
               static_cast<double>(bytes) / 1e6, seconds_since(start));
  const auto count_start = Clock::now();
  trainer.count(texts);
  const double count_s = seconds_since(count_start);
  std::fprintf(stderr, "train tokenizer: %llu words, %zu distinct (counted in %.1f s)\n",
               static_cast<unsigned long long>(trainer.total_words()), trainer.distinct_words(), count_s);

  const auto merge_start = Clock::now();
  double last_report = -1;
  const train::TrainedBpe bpe = trainer.train([&](const train::BpeProgress& p) {
    const bool last = p.merges_done == p.merges_total;
    if (!last && p.elapsed_s - last_report < 2.0) return;
    last_report = p.elapsed_s;
    const double rate = p.elapsed_s > 0 ? static_cast<double>(p.merges_done) / p.elapsed_s : 0.0;
    const double eta = rate > 0 ? static_cast<double>(p.merges_total - std::min(p.merges_total, p.merges_done)) / rate : 0.0;
    std::fprintf(stderr, "train tokenizer: merges %zu/%zu (%.1f%%), %.0f merges/s, elapsed %.1f s, ETA %.1f s\n",
                 p.merges_done, p.merges_total, 100.0 * static_cast<double>(p.merges_done) / p.merges_total, rate,
                 p.elapsed_s, eta);
  });
  const double merge_s = seconds_since(merge_start);

  train::write_tokenizer_files(bpe, args.out_dir, {.model_max_length = args.model_max_length});
  const double train_s = seconds_since(start);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(args.out_dir);  // what the engine will read
  if (tok.vocab_size() != args.vocab_size) {
    throw Error(args.out_dir + ": wrote a vocabulary of " + std::to_string(tok.vocab_size()) + " tokens, not " +
                std::to_string(args.vocab_size));
  }
  std::printf("tokenizer: %s/tokenizer.json, vocab %d (%zu merges, %zu special), trained in %.1f s "
              "(count %.1f s, merges %.1f s) on %.2f MB\n",
              args.out_dir.c_str(), tok.vocab_size(), bpe.merges.size(), bpe.special_tokens.size(), train_s, count_s,
              merge_s, static_cast<double>(bytes) / 1e6);

  nlohmann::json summary{{"vocab_size", tok.vocab_size()},
                         {"merges", bpe.merges.size()},
                         {"train_bytes", bytes},
                         {"train_records", texts.size()},
                         {"count_s", count_s},
                         {"merge_s", merge_s},
                         {"total_s", train_s}};
  const fs::path valid_file = corpus / "valid.jsonl";
  if (fs::is_regular_file(valid_file)) {
    std::printf("%-6s %8s %14s %16s %18s\n", "domain", "records", "bytes/token", "rendered b/tok", "tokens/record");
    nlohmann::json per_domain = nlohmann::json::object();
    for (const auto& [domain, e] : evaluate(tok, valid_file)) {
      std::printf("%-6s %8zu %14.3f %16.3f %18.1f\n", domain.c_str(), e.records, ratio(e.content_bytes, e.content_tokens),
                  ratio(e.rendered_bytes, e.rendered_tokens), ratio(e.rendered_tokens, e.records));
      per_domain[domain] = {{"records", e.records},
                            {"content_bytes_per_token", ratio(e.content_bytes, e.content_tokens)},
                            {"rendered_bytes_per_token", ratio(e.rendered_bytes, e.rendered_tokens)},
                            {"rendered_tokens_per_record", ratio(e.rendered_tokens, e.records)}};
    }
    summary["valid"] = std::move(per_domain);
  }
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

void register_train_tokenizer(CLI::App& train) {
  auto args = std::make_shared<TrainTokenizerArgs>();
  CLI::App* cmd = train.add_subcommand("tokenizer", "train a byte-level BPE tokenizer on a corpus's train split");
  cmd->add_option("--corpus", args->corpus_dir, "corpus directory (from `dspark data corpus`)")->required();
  cmd->add_option("--out", args->out_dir, "output directory for tokenizer.json and tokenizer_config.json")->required();
  cmd->add_option("--vocab-size", args->vocab_size, "vocabulary size including special tokens (default 8192)");
  cmd->add_option("--max-bytes", args->max_bytes, "train on at most this many bytes of rendered text (default: all)");
  cmd->add_option("--threads", args->threads, "threads for word counting (default: all)");
  cmd->add_option("--model-max-length", args->model_max_length, "model_max_length in tokenizer_config.json");
  cmd->callback([args] { run_train_tokenizer(*args); });
}

}  // namespace dspark::cli
