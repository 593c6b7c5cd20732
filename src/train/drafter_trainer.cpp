#include "train/drafter_trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fnv1a.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "train/adamw.h"
#include "train/anchors.h"
#include "train/bf16_autocast.h"
#include "train/checkpoint.h"
#include "train/dspark_loss.h"
#include "train/drafter_train_model.h"
#include "train/eagle3_loss.h"
#include "train/feature_cache.h"
#include "train/regenerate.h"
#include "train/token_dataset.h"

namespace dspark::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kEagle3StepDecay = 0.8;  // step_loss_decay of DeepSpec's EAGLE-3 configs (deepspec-spec 4.1)

struct DataSplit {
  std::vector<RegeneratedSample> train, valid;
  int64_t dropped = 0;  // fewer than min_loss_tokens answer tokens
};

DataSplit load_split(const DrafterTrainOptions& o, int64_t vocab_size) {
  DataSplit split;
  for (RegeneratedSample& s : read_regenerated(o.data_file)) {
    for (int32_t id : s.input_ids)
      if (id < 0 || id >= vocab_size)
        throw Error(o.data_file.string() + ": conversation " + s.id + " holds token id " + std::to_string(id) +
                    ", outside the target's vocabulary [0, " + std::to_string(vocab_size) + ")");
    if (std::count(s.loss_mask.begin(), s.loss_mask.end(), 1) < o.min_loss_tokens) {
      ++split.dropped;
      continue;
    }
    const bool valid = static_cast<int64_t>(fnv1a(s.id) % 100) < o.valid_percent;
    (valid ? split.valid : split.train).push_back(std::move(s));
  }
  if (split.train.empty()) throw Error(o.data_file.string() + ": no training conversation with enough answer tokens");
  return split;
}

// One sequence's blocks: anchors and the validity of each (block, slot) label.
struct Blocks {
  std::vector<int64_t> anchors;
  torch::Tensor valid;  // [n, B] f32
};

Blocks sample_blocks(const RegeneratedSample& s, int64_t block, int64_t max_anchors, sampling::Rng& rng) {
  Blocks b;
  b.anchors = sample_anchors(s.loss_mask, max_anchors, rng);
  // EAGLE-3's row is the one before the anchor, so position 0 cannot anchor (it never does in a
  // chat: position 0 is a prompt token).
  std::erase(b.anchors, 0);
  const std::vector<float> mask = block_label_mask(b.anchors, s.loss_mask, block);
  b.valid = torch::tensor(mask).view({static_cast<int64_t>(b.anchors.size()), block});
  return b;
}

// The step's loss divisor contributed by these blocks: DSpark / DFlash's W (deepspec-spec 3.1,
// sum of w_k m over blocks); EAGLE-3's row count (blocks with a label).
double weight_sum(const Blocks& b, const DSparkLossWeights& w, bool eagle3) {
  if (b.anchors.empty()) return 0.0;
  if (eagle3) return b.valid.select(1, 0).sum().item<double>();
  return (b.valid * position_weights(b.valid.size(1), w.decay_gamma).unsqueeze(0)).sum().item<double>();
}

struct SequenceLoss {
  torch::Tensor total;              // scalar with grad, already / the step's divisor
  double ce = 0, l1 = 0, conf = 0;  // DSpark terms; EAGLE-3's soft CE goes in ce
  torch::Tensor c_star;             // [n, slots]
};

// The frozen target's features of one conversation (under the caller's autocast and no-grad):
// the cache's bytes when it holds them, else the target's forward, stored for the next epoch.
TargetFeatures target_features(const model::Transformer& target, const RegeneratedSample& s, const torch::Tensor& ids,
                               const std::vector<int64_t>& capture_layers, FeatureCache* cache) {
  if (cache)
    if (std::optional<TargetFeatures> f = cache->find(s.id))
      return {f->features.to(target.device()), f->final_hidden.to(target.device())};
  const model::ForwardOutput out = target.forward_sequences(ids.unsqueeze(0), capture_layers);
  TargetFeatures f{torch::cat(out.layer_hidden, -1)[0], out.final_hidden[0]};  // [S, m d], [S, d]
  if (cache) cache->put(s.id, f);
  return f;
}

// The loss of one sequence's blocks, divided by the step's divisor. The frozen target's
// features (no grad) feed the drafter, and its final hidden states give p_t through the LM head
// at the labels' preceding positions.
SequenceLoss sequence_loss(const DrafterTrainModel& drafter, const model::Transformer& target, const RegeneratedSample& s,
                         const Blocks& blocks, const DSparkLossWeights& weights, double weight_total,
                         FeatureCache* cache, bool bf16_autocast = false) {
  const int64_t S = static_cast<int64_t>(s.input_ids.size()), B = drafter.slots();
  const int64_t n = static_cast<int64_t>(blocks.anchors.size());
  const torch::Device device = target.device();
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>(s.input_ids.begin(), s.input_ids.end()), torch::kLong).to(device);
  torch::Tensor features, target_logits;
  std::vector<int64_t> label_pos(n * B), label_ids(n * B);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < B; ++k) {
      label_pos[b * B + k] = std::min(blocks.anchors[b] + k, S - 2);  // p_t for the token after it
      label_ids[b * B + k] = s.input_ids[std::min(blocks.anchors[b] + k + 1, S - 1)];
    }
  DrafterTrainModel::Output z;
  {
    const Bf16Autocast autocast(bf16_autocast);  // the matrix products; the losses below are f32
    {
      torch::NoGradGuard no_grad;
      const TargetFeatures f = target_features(target, s, ids, drafter.config().target_layer_ids, cache);
      features = f.features;
      target_logits = target.lm_head(f.final_hidden.index_select(0, torch::tensor(label_pos).to(device))).view({n, B, -1});
    }
    z = drafter.forward(features, ids, blocks.anchors);
  }
  if (z.confidence_logits.defined()) z.confidence_logits = z.confidence_logits.to(torch::kFloat32);
  if (drafter.config().method == draft::DraftMethod::kEagle3) {
    const Eagle3Loss l = eagle3_loss(z.logits, target_logits, blocks.valid.to(device), kEagle3StepDecay, weight_total);
    return {l.total, l.soft_ce, 0.0, 0.0, l.c_star};
  }
  const DSparkLoss l = dspark_loss(z.logits, target_logits, torch::tensor(label_ids).view({n, B}).to(device),
                                   blocks.valid.to(device), z.confidence_logits, weights, weight_total);
  return {l.total, l.ce, l.l1, l.conf, l.c_star};
}

bool is_eagle3(const draft::DraftConfig& c) { return c.method == draft::DraftMethod::kEagle3; }

DSparkLossWeights loss_weights(const draft::DraftConfig& c) {
  return c.method == draft::DraftMethod::kDSpark ? DSparkLossWeights{} : DSparkLossWeights{.ce = 1.0, .l1 = 0.0, .conf = 0.0};
}

DrafterValidation validate(const DrafterTrainModel& drafter, const model::Transformer& target,
                           const std::vector<RegeneratedSample>& valid, const DrafterTrainOptions& o, FeatureCache* cache) {
  torch::NoGradGuard no_grad;
  const DSparkLossWeights weights = loss_weights(drafter.config());
  AcceptanceMetrics metrics;
  double loss = 0, total_w = 0;
  const int64_t n = std::min<int64_t>(o.valid_sequences, static_cast<int64_t>(valid.size()));
  for (int64_t i = 0; i < n; ++i) {
    sampling::Rng rng(o.seed + 1'000'003 + static_cast<uint64_t>(i));  // the same blocks every validation
    const Blocks blocks = sample_blocks(valid[i], drafter.slots(), o.max_anchors, rng);
    const double w = weight_sum(blocks, weights, is_eagle3(drafter.config()));
    if (w <= 0) continue;
    const SequenceLoss l = sequence_loss(drafter, target, valid[i], blocks, weights, 1.0, cache);
    loss += l.total.item<double>();
    total_w += w;
    metrics.add(l.c_star, blocks.valid);
  }
  DrafterValidation v;
  if (total_w <= 0) return v;
  v.loss = loss / total_w;
  v.tau = metrics.tau();
  for (size_t k = 0; k < metrics.count.size(); ++k) v.accept_rate.push_back(metrics.accept_rate(k));
  return v;
}

std::string format_validation(const DrafterValidation& v) {
  std::string s = "loss " + std::to_string(v.loss) + " tau " + std::to_string(v.tau) + " accept@k";
  for (double a : v.accept_rate) {
    char buf[16];
    std::snprintf(buf, sizeof buf, " %.3f", a);
    s += buf;
  }
  return s;
}

json fingerprint(const DrafterTrainOptions& o, const draft::DraftConfig& config, int64_t n_train) {
  json j = {{"drafter", config.to_json()}, {"epochs", o.epochs},       {"batch_size", o.batch_size},
          {"max_anchors", o.max_anchors}, {"peak_lr", o.peak_lr},    {"warmup_ratio", o.warmup_ratio},
          {"grad_clip", o.grad_clip},     {"seed", o.seed},          {"init_seed", o.init.seed},
          {"train_sequences", n_train},   {"min_loss_tokens", o.min_loss_tokens}};
  // Absent when off, so that checkpoints written before the option existed still resume.
  if (o.bf16_autocast) j["bf16_autocast"] = true;
  return j;
}

}  // namespace

DrafterTrainResult train_drafter(const DrafterTrainOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.batch_size < 1 || o.max_anchors < 1) throw Error("train drafter: --batch and --anchors must be >= 1");
  const model::Transformer target = model::Transformer::load(o.target_dir.string(), {.weight_dtype = model::WeightDType::kF32});
  draft::DrafterInitOptions init = o.init;
  if (init.mask_token_id < 0) {
    const fs::path tok_file = o.target_dir / "tokenizer.json";
    if (fs::exists(tok_file))
      if (auto id = tokenizer::Tokenizer::load(tok_file).token_to_id("<|mask|>")) init.mask_token_id = *id;
  }
  const DataSplit data = load_split(o, target.config().vocab_size);
  const int64_t n_train = static_cast<int64_t>(data.train.size());
  const int64_t total_steps =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.epochs * static_cast<double>(n_train) / o.batch_size)));
  int64_t end_step = o.max_steps > 0 ? std::min(total_steps, o.max_steps) : total_steps;
  const int64_t warmup_steps = static_cast<int64_t>(o.warmup_ratio * static_cast<double>(total_steps));
  std::fprintf(stderr, "train drafter: %ld train / %zu valid conversations (%ld dropped); %ld steps of %ld\n",
               static_cast<long>(n_train), data.valid.size(), static_cast<long>(data.dropped),
               static_cast<long>(total_steps), static_cast<long>(o.batch_size));

  fs::create_directories(o.out_dir / "checkpoints");
  int64_t start_step = 0;
  const fs::path checkpoint = o.resume ? newest_checkpoint(o.out_dir, start_step) : fs::path();
  // The drafter this run asks for (method, layers, heads, and the target it drafts for) is part of
  // what a resumed checkpoint must match, as the schedule is.
  draft::DraftConfig config = draft::make_draft_config(target.config(), init);
  const json schedule = fingerprint(o, config, n_train);
  NamedTensors tensors;
  if (checkpoint.empty()) {
    start_step = 0;
    tensors = draft::random_drafter_tensors(target, config, init.seed);
  } else {
    const json state = read_trainer_state(checkpoint);
    if (state.at("schedule") != schedule)
      throw Error(checkpoint.string() + ": made with " + state.at("schedule").dump() + ", this run asks " +
                  schedule.dump() + " (use another --out, or the same options)");
    config = draft::DraftConfig::load(checkpoint.string());
    tensors = read_named_tensors(checkpoint / "model.safetensors");
    std::fprintf(stderr, "resuming from %s\n", checkpoint.c_str());
  }
  end_step = end_step_after_resume(start_step, end_step);
  const std::unique_ptr<DrafterTrainModel> model = make_drafter_train_model(config, target, tensors);
  const DrafterTrainModel& drafter = *model;
  std::vector<torch::Tensor> params;
  for (const auto& [name, t] : drafter.trainable()) params.push_back(t);
  AdamW optimizer(drafter.trainable(), {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0});
  if (start_step > 0) optimizer.load_state(read_named_tensors(checkpoint / "optimizer.safetensors"), start_step);
  const DSparkLossWeights weights = loss_weights(config);
  std::optional<FeatureCache> cache;
  if (!o.feature_cache_dir.empty()) {
    cache.emplace(o.feature_cache_dir, FeatureCache::fingerprint(o.target_dir, o.data_file, config.target_layer_ids,
                                                                 o.bf16_autocast, torch::Device(target.device().type()).str()));
    std::fprintf(stderr, "feature cache %s: %zu conversations cached\n", o.feature_cache_dir.c_str(), cache->size());
  }
  FeatureCache* const cache_ptr = cache ? &*cache : nullptr;

  std::ofstream log(o.out_dir / "log.jsonl", std::ios::app);
  DrafterTrainResult result;
  WindowSchedule order(n_train, o.seed);
  Progress progress("train " + draft::method_name(config.method), end_step, "tok", start_step);
  int64_t tokens_seen = 0;
  for (int64_t step = start_step; step < end_step; ++step) {
    const std::vector<int64_t> batch = order.windows_of_step(step, o.batch_size);
    std::vector<Blocks> blocks;
    double weight_total = 0;
    for (size_t j = 0; j < batch.size(); ++j) {
      sampling::Rng rng(o.seed * 1'000'003 + static_cast<uint64_t>(step) * 1009 + j);
      blocks.push_back(sample_blocks(data.train[batch[j]], drafter.slots(), o.max_anchors, rng));
      weight_total += weight_sum(blocks.back(), weights, is_eagle3(config));
    }
    double loss = 0, ce = 0, l1 = 0, conf = 0, grad_norm = 0;
    AcceptanceMetrics metrics;
    const double lr = warmup_cosine_lr(step, warmup_steps, total_steps, o.peak_lr, 0.0);
    if (weight_total > 0) {
      for (size_t j = 0; j < batch.size(); ++j) {
        if (blocks[j].anchors.empty()) continue;
        const RegeneratedSample& s = data.train[batch[j]];
        const SequenceLoss l = sequence_loss(drafter, target, s, blocks[j], weights, weight_total, cache_ptr, o.bf16_autocast);
        l.total.backward();
        loss += l.total.item<double>(), ce += l.ce, l1 += l.l1, conf += l.conf;
        metrics.add(l.c_star, blocks[j].valid);
        tokens_seen += static_cast<int64_t>(s.input_ids.size());
      }
      grad_norm = clip_grad_norm(params, o.grad_clip);
      optimizer.step(lr);
    }
    char fields[160];
    std::snprintf(fields, sizeof fields, "loss %.4f tau %.3f lr %.2e", loss, metrics.tau(), lr);
    progress.update(step + 1, fields, tokens_seen);
    log << json{{"step", step + 1}, {"loss", loss}, {"ce", ce},   {"l1", l1}, {"conf", conf},
                {"tau", metrics.tau()}, {"lr", lr}, {"grad_norm", grad_norm}}.dump()
        << std::endl;

    const bool last = step + 1 == end_step;
    if (!data.valid.empty() && ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last)) {
      result.valid = validate(drafter, target, data.valid, o, cache_ptr);
      std::fprintf(stderr, "\nstep %ld validation: %s\n", static_cast<long>(step + 1), format_validation(result.valid).c_str());
      log << json{{"step", step + 1}, {"valid_loss", result.valid.loss}, {"valid_tau", result.valid.tau},
                  {"valid_accept_rate", result.valid.accept_rate}}.dump()
          << std::endl;
    }
    if ((o.save_every > 0 && (step + 1) % o.save_every == 0) || last) {
      save_checkpoint(o.out_dir, step + 1, o.keep_checkpoints, [&](const fs::path& tmp) {
        write_named_tensors(tmp / "model.safetensors", drafter.trainable());
        write_named_tensors(tmp / "optimizer.safetensors", optimizer.state());
        json cfg = config.to_json();
        write_json_file(tmp / "config.json", cfg);
        write_json_file(tmp / "trainer_state.json", {{"step", step + 1}, {"schedule", schedule}, {"loss", loss}});
      });
    }
  }
  progress.finish();
  result.steps = end_step;
  result.final_dir = end_step == total_steps ? o.out_dir / "model" : fs::path();
  // A rerun of a finished run trains nothing: its final drafter and summary stay as written (the
  // rerun has no validation of its own to write); one interrupted before writing them writes them.
  const bool nothing_trained = start_step == end_step;
  if (!result.final_dir.empty() && nothing_trained && fs::exists(result.final_dir / "training_summary.json")) {
    std::fprintf(stderr, "final drafter: %s (already written)\n", result.final_dir.c_str());
  } else if (!result.final_dir.empty()) {
    if (nothing_trained && !data.valid.empty()) result.valid = validate(drafter, target, data.valid, o, cache_ptr);
    draft::write_drafter(config, drafter.checkpoint_tensors(), result.final_dir.string());
    json summary = {{"steps", end_step}, {"train_sequences", n_train}, {"valid_sequences", data.valid.size()},
                    {"valid_loss", result.valid.loss}, {"valid_tau", result.valid.tau},
                    {"valid_accept_rate", result.valid.accept_rate}};
    write_json_file(result.final_dir / "training_summary.json", summary);
    std::fprintf(stderr, "final drafter: %s\n", result.final_dir.c_str());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace dspark::train
