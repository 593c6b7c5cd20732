#include "train/target_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "model/config.h"
#include "model/model_grow.h"
#include "model/model_init.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "train/adamw.h"
#include "train/bf16_autocast.h"
#include "train/checkpoint.h"
#include "train/token_dataset.h"

namespace dspark::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The options a resumed run must share with the run that wrote the checkpoint.
json schedule_fingerprint(const TargetTrainOptions& o, int64_t n_windows) {
  json fingerprint = {{"seq_len", o.seq_len}, {"batch_size", o.batch_size}, {"epochs", o.epochs},
                      {"peak_lr", o.peak_lr}, {"min_lr", o.min_lr}, {"warmup_steps", o.warmup_steps},
                      {"weight_decay", o.weight_decay}, {"grad_clip", o.grad_clip}, {"seed", o.seed},
                      {"train_windows", n_windows}};
  // Absent when off, so that checkpoints written before the option existed still resume.
  if (o.bf16_autocast) fingerprint["bf16_autocast"] = true;
  if (!o.grow_from.empty()) fingerprint["grow_from"] = o.grow_from.string();
  return fingerprint;
}

// Whether a checkpoint holds a model of the shape a config asks for (a resumed run keeps training
// the checkpoint's model, whatever --config says).
bool same_shape(const model::ModelConfig& a, const model::ModelConfig& b) {
  return a.arch == b.arch && a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.n_layers == b.n_layers && a.n_heads == b.n_heads &&
         a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim &&
         a.max_position_embeddings == b.max_position_embeddings;
}

// Next-token loss summed over trained targets, and their count. The LM head runs on the trained
// rows only: on chat data a third of the positions are prompt tokens, and the head plus the
// softmax over the vocabulary are the largest single cost of a step.
std::pair<torch::Tensor, int64_t> summed_loss(const model::Transformer& m, const TokenBatch& batch) {
  torch::Tensor hidden = m.forward_sequences(batch.inputs).final_hidden;  // [b, t, hidden]
  torch::Tensor targets = batch.targets.reshape({-1});
  torch::Tensor rows = (targets != kIgnoreTarget).nonzero().squeeze(1);
  const int64_t count = rows.size(0);
  if (count == 0) return {torch::zeros({}, hidden.options()), 0};
  torch::Tensor logits = m.lm_head(hidden.reshape({-1, hidden.size(-1)}).index_select(0, rows))
                            .to(torch::kFloat);  // [count, vocab]; the softmax in f32 under autocast too
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits, targets.index_select(0, rows), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  return {loss, count};
}

std::map<std::string, double> validation_loss(const model::Transformer& m, const std::map<std::string, TokenStream>& valid,
                                               int64_t seq_len, int64_t max_windows) {
  torch::NoGradGuard no_grad;
  std::map<std::string, double> result;
  for (const auto& [domain, stream] : valid) {
    int64_t n = stream.n_windows(seq_len);
    if (max_windows > 0) n = std::min(n, max_windows);
    double sum = 0;
    int64_t count = 0;
    constexpr int64_t kEvalBatch = 8;
    for (int64_t w = 0; w < n; w += kEvalBatch) {
      std::vector<int64_t> windows;
      for (int64_t i = w; i < std::min(n, w + kEvalBatch); ++i) windows.push_back(i);
      auto [loss, c] = summed_loss(m, make_batch(stream, windows, seq_len));
      sum += loss.item<double>();
      count += c;
    }
    result[domain] = count > 0 ? sum / static_cast<double>(count) : NAN;
  }
  return result;
}

std::string format_losses(const std::map<std::string, double>& losses) {
  std::string s;
  char buf[64];
  for (const auto& [domain, loss] : losses) {
    std::snprintf(buf, sizeof buf, "%s%s %.4f", s.empty() ? "" : " ", domain.c_str(), loss);
    s += buf;
  }
  return s;
}

// Shards of the exported model stay under the 100 MB per-file limit of common git hosts.
constexpr size_t kExportShardBytes = size_t{64} << 20;

void export_final_model(const model::Transformer& m, const TargetTrainOptions& o, const fs::path& dir) {
  const fs::path tmp = dir.string() + ".tmp";
  fs::remove_all(tmp);
  m.save(tmp.string(), model::WeightDType::kBF16, kExportShardBytes);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    if (fs::exists(o.tokenizer_dir / file)) fs::copy_file(o.tokenizer_dir / file, tmp / file);
  model::GenerationConfig generation;
  generation.eos_token_ids = m.config().eos_token_ids;
  write_json_file(tmp / "generation_config.json", generation.to_json());
  fs::remove_all(dir);
  fs::rename(tmp, dir);
}

}  // namespace

TargetTrainResult train_target(const TargetTrainOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.seq_len < 2 || o.batch_size < 1) throw Error("--seq-len must be >= 2 and --batch >= 1");
  // Before any work: the config exists and its positions hold a window.
  const model::ModelConfig requested = model::ModelConfig::load(o.model_config.string());
  requested.check_positions(o.seq_len, "--seq-len");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(o.tokenizer_dir / "tokenizer.json");
  std::fprintf(stderr, "tokenizing %s ...\n", o.corpus_dir.c_str());
  const TokenizedCorpus corpus = tokenize_corpus(tok, o.corpus_dir);
  const int64_t n_windows = corpus.train.n_windows(o.seq_len);
  if (n_windows < 1) throw Error(o.corpus_dir.string() + ": the train split is shorter than one window");
  const int64_t total_steps =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.epochs * static_cast<double>(n_windows) / o.batch_size)));
  int64_t end_step = o.max_steps > 0 ? std::min(total_steps, o.max_steps) : total_steps;
  std::fprintf(stderr, "train: %zu records, %zu tokens (%zu trained), %ld windows of %ld; %ld steps of %ld windows\n",
               corpus.train.records, corpus.train.ids.size(), corpus.train.trained_tokens(),
               static_cast<long>(n_windows), static_cast<long>(o.seq_len), static_cast<long>(total_steps),
               static_cast<long>(o.batch_size));

  fs::create_directories(o.out_dir / "checkpoints");
  const json fingerprint = schedule_fingerprint(o, n_windows);
  int64_t start_step = 0;
  fs::path checkpoint = o.resume ? newest_checkpoint(o.out_dir, start_step) : fs::path();
  if (checkpoint.empty()) {
    model::ModelConfig config = requested;
    if (config.vocab_size < tok.vocab_size())
      throw Error(o.model_config.string() + ": vocab_size " + std::to_string(config.vocab_size) +
                  " is smaller than the tokenizer's " + std::to_string(tok.vocab_size()));
    config.torch_dtype = "float32";
    start_step = 0;
    checkpoint = o.out_dir / "checkpoints" / checkpoint_name(0);
    fs::remove_all(checkpoint);
    if (o.grow_from.empty()) {
      model::write_random_checkpoint(config, checkpoint.string(), {.seed = o.seed});
    } else {
      std::fprintf(stderr, "growing %s into %s\n", o.grow_from.c_str(), o.model_config.c_str());
      model::write_checkpoint(config, checkpoint.string(), model::grown_weights(o.grow_from.string(), config, o.seed), {});
    }
    write_json_file(checkpoint / "trainer_state.json", {{"step", 0}, {"schedule", fingerprint}});
  } else {
    const json state = read_trainer_state(checkpoint);
    if (!same_shape(requested, model::ModelConfig::load(checkpoint.string())))
      throw Error(checkpoint.string() + ": a model of another shape than " + o.model_config.string() +
                  " (use another --out, or the same --config)");
    if (state.at("schedule") != fingerprint)
      throw Error(checkpoint.string() + ": made with " + state.at("schedule").dump() + ", this run asks " +
                  fingerprint.dump() + " (use another --out, or the same options)");
    std::fprintf(stderr, "resuming from %s\n", checkpoint.c_str());
  }

  end_step = end_step_after_resume(start_step, end_step);
  model::Transformer m = model::Transformer::load(checkpoint.string(), {.weight_dtype = model::WeightDType::kF32});
  m.set_requires_grad(true);
  const auto named = m.named_parameters();
  std::vector<torch::Tensor> params;
  for (const auto& [name, t] : named) params.push_back(t);
  AdamW optimizer(named, {.weight_decay = o.weight_decay});
  if (start_step > 0) optimizer.load_state(read_named_tensors(checkpoint / "optimizer.safetensors"), start_step);

  std::ofstream log(o.out_dir / "log.jsonl", std::ios::app);
  auto save = [&](int64_t step, double loss, const std::map<std::string, double>& valid) {
    save_checkpoint(o.out_dir, step, o.keep_checkpoints, [&](const fs::path& tmp) {
      m.save(tmp.string(), model::WeightDType::kF32);
      write_named_tensors(tmp / "optimizer.safetensors", optimizer.state());
      json state = {{"step", step}, {"schedule", fingerprint}, {"loss", loss}};
      if (!valid.empty()) state["valid_loss"] = valid;
      write_json_file(tmp / "trainer_state.json", state);
    });
  };

  TargetTrainResult result;
  WindowSchedule schedule(n_windows, o.seed);
  Progress progress("train target", end_step, "tok", start_step);
  int64_t tokens_seen = 0;
  double loss_ema = NAN;
  for (int64_t step = start_step; step < end_step; ++step) {
    const TokenBatch batch = make_batch(corpus.train, schedule.windows_of_step(step, o.batch_size), o.seq_len);
    auto [loss_sum, count] = [&] {
      Bf16Autocast autocast(o.bf16_autocast);
      return summed_loss(m, batch);
    }();
    double loss = NAN, grad_norm = 0;
    const double lr = warmup_cosine_lr(step, o.warmup_steps, total_steps, o.peak_lr, o.min_lr);
    if (count > 0) {
      torch::Tensor loss_mean = loss_sum / static_cast<double>(count);
      loss_mean.backward();
      loss = loss_mean.item<double>();
      grad_norm = clip_grad_norm(params, o.grad_clip);
      optimizer.step(lr);
    }
    tokens_seen += o.batch_size * o.seq_len;
    loss_ema = std::isnan(loss_ema) ? loss : 0.95 * loss_ema + 0.05 * loss;
    result.last_loss = loss;
    char fields[160];
    std::snprintf(fields, sizeof fields, "loss %.4f (avg %.4f) lr %.2e", loss, loss_ema, lr);
    progress.update(step + 1, fields, tokens_seen);
    if ((step + 1) % 10 == 0 || step + 1 == end_step)
      log << json{{"step", step + 1}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                  {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}}
                 .dump()
          << std::endl;

    std::map<std::string, double> valid;
    const bool last = step + 1 == end_step;
    if ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last) {
      valid = validation_loss(m, corpus.valid, o.seq_len, o.eval_windows);
      std::fprintf(stderr, "%sstep %ld validation loss: %s\n", "\n", static_cast<long>(step + 1),
                   format_losses(valid).c_str());
      log << json{{"step", step + 1}, {"valid_loss", valid}}.dump() << std::endl;
      result.valid_loss = valid;
    }
    if ((o.save_every > 0 && (step + 1) % o.save_every == 0) || last) save(step + 1, loss, valid);
  }
  progress.finish();
  result.steps = end_step;
  if (end_step == total_steps) {
    result.final_model_dir = o.out_dir / "model";
    // A rerun of a finished run (nothing trained) keeps the model it exported.
    if (start_step < end_step || !fs::exists(result.final_model_dir / "config.json"))
      export_final_model(m, o, result.final_model_dir);
    std::fprintf(stderr, "final model: %s\n", result.final_model_dir.c_str());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::map<std::string, double> evaluate_target(const fs::path& model_dir, const fs::path& corpus_dir,
                                              const fs::path& tokenizer_dir, int64_t seq_len, int64_t max_windows,
                                              model::WeightDType weight_dtype) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(tokenizer_dir);  // a directory or a .gguf file
  TokenizedCorpus corpus;
  for_each_record(corpus_dir / "valid.jsonl",
                  [&](Record&& r) { corpus.valid[std::string(domain_name(r.domain))].append(tok, r); });
  const model::Transformer m = model::Transformer::load(model_dir.string(), {.weight_dtype = weight_dtype});
  m.config().check_positions(seq_len, "--seq-len");
  return validation_loss(m, corpus.valid, seq_len, max_windows);
}

}  // namespace dspark::train
