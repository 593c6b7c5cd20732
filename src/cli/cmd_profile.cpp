// dspark profile: measure the step-cost curves behind the schedulers' SPS(B) table (verify
// forward at every B, batched drafting at every R) and cache them for this model, drafter and
// machine; `generate` and `bench serve` read the cache.
#include <cstdio>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "draft/load_drafter.h"
#include "engine/step_cost.h"

namespace dspark::cli {

namespace {

struct ProfileArgs {
  std::string model_dir, draft_dir, method, dtype = "auto", draft_dtype = "auto", kv_cache_dtype = "f32", out;
  engine::ProfileOptions options;
  bool json = false;
};

void run_profile(const ProfileArgs& a) {
  torch::NoGradGuard no_grad;
  const std::string dir = a.model_dir.empty() ? default_model_dir() : a.model_dir;
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype), parse_kv_cache_dtype(a.kv_cache_dtype)});
  const model::WeightDType draft_dtype = resolve_draft_dtype(a.draft_dtype, target);
  std::unique_ptr<draft::Drafter> drafter;
  if (!a.draft_dir.empty() || !a.method.empty())
    drafter = draft::load_drafter(a.method, a.draft_dir, target,
                                  {.max_slots = a.options.max_requests, .capacity = a.options.context + a.options.gamma + 64,
                                   .weight_dtype = draft_dtype});
  const schedule::SpsMeta meta = engine::step_cost_meta(dir, target, a.draft_dir, draft_dtype);
  const engine::StepCost cost = engine::profile_step_cost(target, drafter.get(), a.options, meta);
  const std::filesystem::path file =
      a.out.empty() ? engine::default_cache_dir() / schedule::cache_file_name(meta) : std::filesystem::path(a.out);
  cost.save(file);
  if (a.json) {
    std::cout << cost.to_json().dump() << "\n";
  } else {
    std::printf("| B | verify ms | SPS(B) at R = ceil(B / (gamma + 1)) |\n|---|---|---|\n");
    for (size_t b = 0; b < cost.verify_seconds.size(); ++b) {
      const int64_t B = static_cast<int64_t>(b) + 1;
      const int64_t R = (B + a.options.gamma) / (a.options.gamma + 1);
      if (B <= 16 || B % 8 == 0) std::printf("| %ld | %.3f | %.1f |\n", static_cast<long>(B), 1e3 * cost.verify_seconds[b],
                                             cost.sps_for(R).sps(B));
    }
    std::printf("\n| R | draft ms | R requests of one token: verify ms |\n|---|---|---|\n");
    for (size_t r = 0; r < cost.plain_verify_seconds.size(); ++r) {
      if (r >= 8 && (r + 1) % 8 != 0) continue;
      char draft[32] = "-";
      if (r < cost.draft_seconds.size()) std::snprintf(draft, sizeof draft, "%.3f", 1e3 * cost.draft_seconds[r]);
      std::printf("| %zu | %s | %.3f |\n", r + 1, draft, 1e3 * cost.plain_verify_seconds[r]);
    }
  }
  std::fprintf(stderr, "profile saved to %s\n", file.c_str());
}

}  // namespace

void register_profile(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "measure the step cost behind the SPS(B) table and cache it");
  cmd->add_option("--model", a->model_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->draft_dir, "drafter directory: its batched drafting cost is measured too");
  cmd->add_option("--method", a->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  add_dtype_option(cmd, a->dtype);
  add_draft_dtype_option(cmd, a->draft_dtype);
  add_kv_cache_dtype_option(cmd, a->kv_cache_dtype);
  cmd->add_option("--max-requests", a->options.max_requests, "largest concurrency R to cover")->capture_default_str()
      ->check(between(1, 1024));
  cmd->add_option("--gamma", a->options.gamma, "drafts per request: B runs to R x (gamma + 1)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--context", a->options.context, "cached positions per request while measuring")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--runs", a->options.runs, "passes over every point, one to three timed steps of each per pass (median)")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--committed", a->options.committed,
                  "tokens each request commits before a timed drafting call (default: (gamma + 1) / 2)");
  cmd->add_option("--out", a->out, "write here instead of the cache directory")
      ->check(writable_file());
  cmd->add_flag("--json", a->json, "print the profile as JSON");
  cmd->callback([a] { run_profile(*a); });
}

}  // namespace dspark::cli
