// dspark calibrate: Sequential Temperature Scaling of a DSpark drafter's confidences
// (dspark-method.md 4.2). Real speculative rollouts on held-out prompts give, per round, the raw
// confidences and how many drafts the target accepted; one temperature per position is fitted left
// to right (calibrate/sts.h) and saved as sts.json beside the drafter, which applies it from then on.
// Prints ECE before / after and ROC-AUC per position, and draws the reliability diagrams.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "calibrate/reliability_figure.h"
#include "calibrate/sts.h"
#include "calibrate/sts_file.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "draft/dspark_drafter.h"
#include "sampling/rng.h"
#include "train/corpus.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;

struct CalibrateArgs {
  std::string target_dir, draft_dir, corpus_dir, prompts, plot, dtype = "auto", draft_dtype = "auto";
  int64_t limit = 200;
  bool dry_run = false;
  bench::AcceptOptions options;
};

// Held-out prompts: the first user turn of the corpus's validation conversations (never trained
// on by the target or the drafters, and not the evaluation prompts), or a prompt file.
std::vector<std::string> held_out_prompts(const CalibrateArgs& a) {
  if (a.corpus_dir.empty() == a.prompts.empty()) throw Error("calibrate: give exactly one of --corpus and --prompts");
  if (!a.prompts.empty()) return bench::read_prompts(a.prompts, "turns", a.limit);
  return train::first_user_turns(fs::path(a.corpus_dir) / "valid.jsonl", a.limit);
}

void run(CalibrateArgs a) {
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);
  if (!tok) throw Error(dir + ": no tokenizer.json");
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype)});
  // The drafter as generate and serve run it (--draft-dtype), so STS fits the confidences they see.
  auto drafter = draft::DSparkDrafter::load(a.draft_dir, target, {.max_slots = 1, .capacity = 8192,
                                                                  .weight_dtype = resolve_draft_dtype(a.draft_dtype, target)});
  if (!drafter->config().confidence_head) throw Error(a.draft_dir + ": this drafter has no confidence head to calibrate");
  // sts.json holds one temperature per position of the block: a larger gamma wrote one the
  // drafter then refused to load with.
  a.options.gamma = resolve_gamma(a.options.gamma, *drafter);
  drafter->set_confidence_temperatures({});  // fit on the raw confidences
  const std::vector<std::string> prompts = held_out_prompts(a);
  Progress progress("calibrate rollouts", static_cast<int64_t>(prompts.size()), "prompt");
  const bench::AcceptResult rollouts =
      bench::run_accept(target, *drafter, *tok, dir, prompts, a.options, [&](int64_t n) { progress.update(n); });
  progress.finish();
  const std::vector<calibrate::Round> rounds = bench::calibration_rounds(rollouts.rounds);
  const int n_positions = static_cast<int>(a.options.gamma);
  const std::vector<double> temperatures = calibrate::fit_sts(rounds, n_positions);
  const std::vector<calibrate::StsPositionReport> report = calibrate::sts_report(rounds, temperatures);

  std::printf("STS on %zu rounds from %zu held-out prompts (T = %.2f, gamma = %d)\n\n", rounds.size(), prompts.size(),
              a.options.temperature, n_positions);
  // "AUC exact": the AUC of the exact acceptance probabilities (1 - TV per slot), the ceiling of
  // any confidence head on these rounds.
  std::printf("| position | rounds | acceptance | temperature | ECE before | ECE after | AUC before | AUC after | AUC exact |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  bool any = false;
  for (const auto& r : report) {
    if (r.n == 0) continue;
    any = true;
    std::printf("| %d | %lld | %.3f | %.3f | %.4f | %.4f | %.3f | %.3f | %.3f |\n", r.position + 1,
                static_cast<long long>(r.n), r.label_mean, temperatures[r.position], r.ece_before, r.ece_after,
                r.auc_before, r.auc_after, r.auc_exact);
  }
  if (any) {
    const calibrate::StsMeans m = calibrate::sts_means(report);
    sampling::Rng rng(0);
    const double floor = calibrate::ece_floor(rounds, temperatures, calibrate::kEceFloorDraws, rng);
    std::printf("\nmean over positions (weighted by rounds): ECE %.4f -> %.4f, AUC %.3f (exact probabilities: %.3f)\n"
                "a perfectly calibrated head would read ECE %.4f on these rounds (labels redrawn from its predictions)\n",
                m.ece_before, m.ece_after, m.auc_after, m.auc_exact, floor);
  }
  if (!a.dry_run) {
    calibrate::write_sts_file(a.draft_dir,
                              {.temperatures = temperatures,
                               .rounds = static_cast<int64_t>(rounds.size()),
                               .prompts = static_cast<int64_t>(prompts.size()),
                               // Names, not machine paths: the file travels with the drafter.
                               .source = a.corpus_dir.empty() ? fs::path(a.prompts).filename().string()
                                                              : (fs::path(a.corpus_dir).filename() / "valid.jsonl").string(),
                               .sampling_temperature = a.options.temperature,
                               .gamma = a.options.gamma,
                               .positions = report});
    std::printf("wrote %s/%s\n", a.draft_dir.c_str(), calibrate::kStsFile);
  }
  if (!a.plot.empty()) {
    plot::write_svg(a.plot, calibrate::reliability_figure(rounds, temperatures, n_positions));
    std::printf("wrote %s\n", a.plot.c_str());
  }
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate", "fit STS temperatures for a DSpark drafter's confidences");
  cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->draft_dir, "DSpark drafter directory; sts.json is written here")->required();
  cmd->add_option("--corpus", a->corpus_dir, "held-out prompts: first user turns of DIR/valid.jsonl (dspark data corpus)");
  cmd->add_option("--prompts", a->prompts, "held-out prompts: a {\"turns\": [...]} JSONL file (not an evaluation set)");
  cmd->add_option("--limit", a->limit, "prompts used (0: all)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--temperature", a->options.temperature, "sampling temperature of the rollouts")->capture_default_str();
  cmd->add_option("--gamma", a->options.gamma, "drafts per round")->capture_default_str();
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per prompt")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--seed", a->options.seed, "prompt i samples with seed + i")->capture_default_str()->check(at_least(0));
  cmd->add_option("--plot", a->plot, "write the reliability diagrams to this SVG file")
      ->check(writable_file());
  add_dtype_option(cmd, a->dtype, "target weights");
  add_draft_dtype_option(cmd, a->draft_dtype);
  cmd->add_flag("--dry-run", a->dry_run, "report only; do not write sts.json");
  cmd->callback([a] { run(*a); });
}

}  // namespace dspark::cli
