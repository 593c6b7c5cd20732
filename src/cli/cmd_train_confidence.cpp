// dspark train confidence: refit a DSpark drafter's confidence head on the drafter's own rollouts
// (train/confidence_refit.h). Rollouts on the first user turns of the corpus's training split run
// in chunks saved under OUT/rollouts (a rerun resumes after the last whole chunk); the last
// --holdout-percent of the rounds are kept out of the fit and report the old and the new head
// side by side (STS fitted on them, then ECE and ROC-AUC per slot, as `dspark calibrate` does).
// OUT receives the drafter with the new head; calibrate it with `dspark calibrate` afterwards.
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "calibrate/sts.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "model/safetensors.h"
#include "train/confidence_refit.h"
#include "train/corpus.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;

struct RefitArgs {
  std::string target_dir, draft_dir, corpus_dir, out_dir, dtype = "auto";
  int64_t limit = 2000, chunk = 50;
  double l2 = 1e-4, holdout_percent = 10;
  bench::AcceptOptions options;
};

fs::path chunk_file(const RefitArgs& a, int64_t chunk) {
  char name[32];
  std::snprintf(name, sizeof(name), "chunk-%05lld.pt", static_cast<long long>(chunk));
  return fs::path(a.out_dir) / "rollouts" / name;
}

void save_chunk(const fs::path& file, const train::ConfidenceRollouts& r) {
  const fs::path tmp = file.string() + ".tmp";
  torch::save(std::vector<torch::Tensor>{r.hidden, r.prev, r.exact, r.accepted}, tmp.string());
  fs::rename(tmp, file);  // whole chunks only: an interrupted write leaves nothing to resume from
}

train::ConfidenceRollouts load_chunk(const fs::path& file) {
  std::vector<torch::Tensor> t;
  try {
    torch::load(t, file.string());
  } catch (const c10::Error&) {  // libtorch's message is a page of backtrace
    throw Error(file.string() + ": not a readable rollout chunk (truncated or damaged; delete it to roll out again)");
  }
  if (t.size() != 4) throw Error(file.string() + ": not a rollout chunk");
  return {t[0], t[1], t[2], t[3]};
}

// Rollouts of every chunk, run or loaded.
train::ConfidenceRollouts collect_rollouts(const RefitArgs& a, model::Transformer& target, draft::DSparkDrafter& drafter,
                                           const tokenizer::Tokenizer& tok, const std::string& target_dir) {
  // The training split (the drafter's data came from it; calibration and evaluation use other prompts).
  const std::vector<std::string> prompts = train::first_user_turns(fs::path(a.corpus_dir) / "train.jsonl", a.limit);
  const int64_t n = static_cast<int64_t>(prompts.size()), n_chunks = (n + a.chunk - 1) / a.chunk;
  fs::create_directories(fs::path(a.out_dir) / "rollouts");
  int64_t resumed = 0;
  while (resumed < n_chunks && fs::exists(chunk_file(a, resumed))) ++resumed;
  Progress progress("confidence rollouts", n, "prompt", std::min(n, resumed * a.chunk));
  train::RolloutRecorder recorder(drafter);
  std::vector<train::ConfidenceRollouts> parts;
  for (int64_t c = 0; c < n_chunks; ++c) {
    if (c < resumed) {
      parts.push_back(load_chunk(chunk_file(a, c)));
      continue;
    }
    const int64_t begin = c * a.chunk, end = std::min(n, begin + a.chunk);
    bench::AcceptOptions options = a.options;
    options.seed = a.options.seed + static_cast<uint64_t>(begin);  // prompt i samples with seed + i, chunked or not
    const bench::AcceptResult result =
        bench::run_accept(target, recorder, tok, target_dir, {prompts.begin() + begin, prompts.begin() + end}, options,
                          [&](int64_t done) { progress.update(begin + done); });
    parts.push_back(recorder.take(result.rounds, a.options.gamma));
    save_chunk(chunk_file(a, c), parts.back());
  }
  progress.finish();
  return train::concat(parts);
}

train::ConfidenceRollouts rows(const train::ConfidenceRollouts& r, int64_t begin, int64_t end) {
  return {r.hidden.slice(0, begin, end), r.prev.slice(0, begin, end), r.exact.slice(0, begin, end),
          r.accepted.slice(0, begin, end)};
}

// Each round's confidence logits over its verified slots, from logits [n, gamma], for STS.
std::vector<calibrate::Round> sts_rounds(const train::ConfidenceRollouts& r, const torch::Tensor& logits) {
  std::vector<calibrate::Round> rounds;
  auto exact = r.exact.accessor<float, 2>();
  auto z = logits.accessor<float, 2>();
  auto accepted = r.accepted.accessor<int64_t, 1>();
  for (int64_t i = 0; i < r.exact.size(0); ++i) {
    calibrate::Round round;
    for (int64_t k = 0; k < r.exact.size(1) && std::isfinite(exact[i][k]); ++k) {
      round.logits.push_back(z[i][k]);
      round.exact.push_back(exact[i][k]);
    }
    round.accepted = static_cast<int>(accepted[i]);
    if (!round.logits.empty()) rounds.push_back(std::move(round));
  }
  return rounds;
}

struct HeadReport {
  std::vector<calibrate::StsPositionReport> positions;
  calibrate::StsMeans mean;
};

HeadReport report_head(const train::ConfidenceRollouts& r, const torch::Tensor& logits, int n_positions) {
  const std::vector<calibrate::Round> rounds = sts_rounds(r, logits);
  const std::vector<double> temperatures = calibrate::fit_sts(rounds, n_positions);
  HeadReport out;
  out.positions = calibrate::sts_report(rounds, temperatures);
  out.mean = calibrate::sts_means(out.positions);
  return out;
}

// The drafter's files in out_dir with the new head: every tensor as stored, the head's two in
// their stored dtype. sts.json and the reliability figure described the old head and stay behind.
void write_drafter(const RefitArgs& a, const train::ConfidenceFit& fit) {
  for (const fs::directory_entry& e : fs::directory_iterator(a.draft_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "sts.json" || name == "reliability.svg" || e.path().extension() == ".safetensors" ||
        name == "model.safetensors.index.json")
      continue;
    fs::copy_file(e.path(), fs::path(a.out_dir) / name, fs::copy_options::overwrite_existing);
  }
  const model::SafetensorsArchive archive = model::SafetensorsArchive::open(a.draft_dir);
  std::deque<std::vector<uint16_t>> narrowed;  // the head's narrowed values; a deque keeps them in place
  std::vector<model::TensorToWrite> tensors;
  for (const auto& [name, view] : archive.views()) {
    const torch::Tensor* fitted = name == "confidence_head.proj.weight" ? &fit.weight
                                  : name == "confidence_head.proj.bias" ? &fit.bias
                                                                        : nullptr;
    if (!fitted) {
      tensors.push_back({name, view.dtype, view.shape, view.data, view.n_bytes});
      continue;
    }
    if (fitted->numel() != view.numel()) throw Error(archive.path() + ": tensor '" + name + "' does not match the head");
    const float* values = fitted->data_ptr<float>();
    if (view.dtype == model::DType::kF32) {
      tensors.push_back({name, view.dtype, view.shape, values, view.n_bytes});
      continue;
    }
    std::vector<uint16_t>& bits = narrowed.emplace_back();
    for (int64_t i = 0; i < fitted->numel(); ++i)
      bits.push_back(view.dtype == model::DType::kBF16 ? model::f32_to_bf16(values[i]) : model::f32_to_f16(values[i]));
    tensors.push_back({name, view.dtype, view.shape, bits.data(), bits.size() * 2});
  }
  model::write_safetensors((fs::path(a.out_dir) / "model.safetensors").string(), tensors, archive.metadata());
}

nlohmann::json positions_json(const HeadReport& h) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : h.positions)
    out.push_back({{"position", p.position + 1}, {"rounds", p.n}, {"acceptance", p.label_mean},
                   {"ece_after_sts", p.ece_after}, {"auc", p.auc_after}, {"auc_exact", p.auc_exact}});
  return out;
}

void run(RefitArgs a) {
  if (a.chunk < 1) throw Error("--chunk must be at least 1");
  if (a.limit < 1) throw Error("--limit must be at least 1");
  if (!(a.holdout_percent > 0 && a.holdout_percent < 100)) throw Error("--holdout-percent must be in (0, 100)");
  const std::string target_dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(target_dir);
  if (!tok) throw Error(target_dir + ": no tokenizer.json");
  model::Transformer target = model::Transformer::load(target_dir, {parse_weight_dtype(a.dtype)});
  auto drafter = draft::DSparkDrafter::load(a.draft_dir, target, {.max_slots = 1, .capacity = 8192});
  if (!drafter->config().confidence_head) throw Error(a.draft_dir + ": this drafter has no confidence head to refit");
  if (a.options.gamma > drafter->config().block_size) throw Error("--gamma exceeds the drafter's block size");
  if (fs::absolute(a.out_dir) == fs::absolute(a.draft_dir)) throw Error("--out must not be the drafter's own directory");

  const train::ConfidenceRollouts all = collect_rollouts(a, target, *drafter, *tok, target_dir);
  const int64_t n = all.exact.size(0), n_fit = n - static_cast<int64_t>(std::llround(n * a.holdout_percent / 100.0));
  if (n_fit < 1 || n_fit >= n) throw Error("too few rollout rounds (" + std::to_string(n) + ") to hold some out");
  const train::ConfidenceRollouts fit_rows = rows(all, 0, n_fit), held_out = rows(all, n_fit, n);
  const draft::DraftConfig& config = drafter->config();
  const torch::Tensor w1 = config.confidence_with_markov ? drafter->network().markov().w1() : torch::Tensor();
  std::printf("fitting the head on %lld rounds (%lld held out)\n", static_cast<long long>(n_fit),
              static_cast<long long>(n - n_fit));
  const train::ConfidenceFit fit = train::fit_confidence_head(train::confidence_examples(fit_rows, w1), a.l2);

  // Both heads' logits on the held-out rounds, every slot.
  const int64_t gamma = a.options.gamma, d = config.backbone.hidden_size;
  const torch::Tensor h = held_out.hidden.reshape({-1, d});
  const torch::Tensor w1_prev = w1.defined() ? w1.index_select(0, held_out.prev.reshape({-1})) : torch::Tensor();
  const torch::Tensor input = w1.defined() ? torch::cat({h, w1_prev}, 1) : h;
  const torch::Tensor old_logits = drafter->network().confidence().block(h, w1_prev).view({-1, gamma}).contiguous();
  const torch::Tensor new_logits = torch::linear(input, fit.weight, fit.bias).view({-1, gamma}).contiguous();
  const train::ConfidenceExamples held_examples = train::confidence_examples(held_out, w1);
  const torch::Tensor verified = torch::isfinite(held_out.exact).view({-1}).nonzero().view({-1});
  const double bce_old = train::weighted_soft_bce(old_logits.view({-1}).index_select(0, verified), held_examples);
  const double bce_new = train::weighted_soft_bce(new_logits.view({-1}).index_select(0, verified), held_examples);
  const HeadReport before = report_head(held_out, old_logits, static_cast<int>(gamma));
  const HeadReport after = report_head(held_out, new_logits, static_cast<int>(gamma));

  std::printf("\nheld-out rounds: %lld (T = %.2f, gamma = %lld); STS fitted on them for each head\n\n",
              static_cast<long long>(n - n_fit), a.options.temperature, static_cast<long long>(gamma));
  std::printf("| position | rounds | acceptance | ECE after STS, old head | new head | AUC, old head | new head | AUC exact |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < before.positions.size(); ++k) {
    const auto &o = before.positions[k], &p = after.positions[k];
    if (o.n == 0) continue;
    std::printf("| %d | %lld | %.3f | %.4f | %.4f | %.3f | %.3f | %.3f |\n", o.position + 1, static_cast<long long>(o.n),
                o.label_mean, o.ece_after, p.ece_after, o.auc_after, p.auc_after, o.auc_exact);
  }
  std::printf("\nweighted over positions: ECE after STS %.4f -> %.4f, AUC %.3f -> %.3f (exact probabilities: %.3f)\n",
              before.mean.ece_after, after.mean.ece_after, before.mean.auc_after, after.mean.auc_after,
              before.mean.auc_exact);
  std::printf("eq. 11 loss on the held-out slots: %.4f -> %.4f (fit: %.4f after %d Newton steps)\n", bce_old, bce_new,
              fit.loss, fit.iterations);

  write_drafter(a, fit);
  write_json_file((fs::path(a.out_dir) / "confidence_refit.json").string(),
                  nlohmann::json{{"source", fs::path(a.draft_dir).filename().string()},
                                 {"prompts", "first user turns of " + (fs::path(a.corpus_dir).filename() / "train.jsonl").string()},
                                 {"n_prompts", a.limit},
                                 {"rounds_fit", n_fit},
                                 {"rounds_held_out", n - n_fit},
                                 {"sampling_temperature", a.options.temperature},
                                 {"gamma", gamma},
                                 {"max_tokens", a.options.max_tokens},
                                 {"l2", a.l2},
                                 {"newton_steps", fit.iterations},
                                 {"held_out_loss", {{"old", bce_old}, {"new", bce_new}}},
                                 {"held_out_ece_after_sts", {{"old", before.mean.ece_after}, {"new", after.mean.ece_after}}},
                                 {"held_out_auc",
                                  {{"old", before.mean.auc_after}, {"new", after.mean.auc_after}, {"exact", before.mean.auc_exact}}},
                                 {"held_out_positions_old", positions_json(before)},
                                 {"held_out_positions_new", positions_json(after)}});
  std::printf("wrote %s (the drafter with the refitted head; calibrate it with `dspark calibrate`)\n", a.out_dir.c_str());
}

}  // namespace

void register_train_confidence(CLI::App& train) {
  auto a = std::make_shared<RefitArgs>();
  CLI::App* cmd = train.add_subcommand("confidence", "refit a DSpark drafter's confidence head on its own rollouts");
  cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->draft_dir, "DSpark drafter directory (left unchanged)")->required();
  cmd->add_option("--corpus", a->corpus_dir, "prompts: first user turns of DIR/train.jsonl (dspark data corpus)")->required();
  cmd->add_option("--out", a->out_dir, "output: the drafter with the refitted head, and rollouts/ (resumable)")->required();
  cmd->add_option("--limit", a->limit, "training prompts used")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--chunk", a->chunk, "prompts per saved rollout chunk")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--holdout-percent", a->holdout_percent, "last rounds kept out of the fit, for the report")->capture_default_str()
      ->check(between(0, 99));
  cmd->add_option("--l2", a->l2, "L2 penalty on the head's weights (the bias is free)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--temperature", a->options.temperature, "sampling temperature of the rollouts")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--gamma", a->options.gamma, "drafts per round")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per prompt")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--seed", a->options.seed, "prompt i samples with seed + i")->capture_default_str()->check(at_least(0));
  add_dtype_option(cmd, a->dtype, "target weights");
  cmd->callback([a] { run(*a); });
}

}  // namespace dspark::cli
