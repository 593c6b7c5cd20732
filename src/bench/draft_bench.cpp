#include "bench/draft_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "draft/draft_init.h"
#include "draft/load_drafter.h"

namespace dspark::bench {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// DSpark and DFlash draft a block of gamma slots (block_size = gamma); EAGLE-3 chains gamma steps.
std::unique_ptr<draft::Drafter> random_drafter(const model::Transformer& target, const std::string& method,
                                               int64_t gamma, int64_t capacity, const std::string& work_dir) {
  draft::DrafterInitOptions init;
  init.method = draft::parse_method(method);
  init.block_size = std::max<int64_t>(1, gamma);
  const std::string dir = work_dir + "/" + method + "-g" + std::to_string(gamma);
  draft::write_random_drafter(target, draft::make_draft_config(target.config(), init), dir, 1);
  return draft::load_drafter(method, dir, target, {.max_slots = 1, .capacity = capacity});
}

}  // namespace

std::vector<DraftPoint> run_draft_bench(const model::Transformer& target, const DraftBenchOptions& o,
                                        const std::function<void(const std::string&)>& progress) {
  torch::NoGradGuard no_grad;
  const model::ModelConfig& c = target.config();
  std::filesystem::create_directories(o.work_dir);
  std::vector<DraftPoint> points;
  const int64_t n_calls = o.warmup + o.runs;
  const int64_t capacity = o.context + 2 * n_calls + 32;
  const int64_t n_methods = static_cast<int64_t>(o.methods.size());
  sampling::SamplingParams params{.temperature = 1.0};
  for (int64_t gamma : o.gammas) {
    // The methods take turns call by call, so a slow patch of the machine (or the context growing
    // by a row or two per call) affects them all alike and their ratios stay fair.
    std::vector<std::unique_ptr<draft::Drafter>> drafters;
    std::vector<int64_t> widths;
    std::vector<DraftPoint> gamma_points;
    at::Generator gen = at::detail::createCPUGenerator(7);
    std::vector<int64_t> prompt(o.context);
    for (int64_t i = 0; i < o.context; ++i) prompt[i] = (i * 7919) % c.vocab_size;
    for (const std::string& method : o.methods) {
      drafters.push_back(random_drafter(target, method, gamma, capacity, o.work_dir));
      widths.push_back(c.hidden_size * static_cast<int64_t>(drafters.back()->target_layer_ids().size()));
      drafters.back()->begin(0, prompt, torch::randn({o.context, widths.back()}, gen).to(target.device()));
      gamma_points.push_back({method, gamma, 0, {}});
    }
    sampling::Rng rng(1);
    for (int64_t call = 0; call < n_calls; ++call) {
      const int64_t rows = 1 + call % 2;  // a verify round commits anchor (+ accepted drafts)
      for (int64_t turn = 0; turn < n_methods; ++turn) {
        const int64_t i = (call + turn) % n_methods;
        const auto t0 = std::chrono::steady_clock::now();
        drafters[i]->propose({{0, static_cast<int64_t>(call % c.vocab_size), gamma, 0.0, &params, &rng}});
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (call >= o.warmup) gamma_points[i].runs_ms.push_back(ms);
        drafters[i]->commit(0, std::vector<int64_t>(rows, 1), torch::randn({rows, widths[i]}, gen).to(target.device()));
      }
    }
    for (DraftPoint& point : gamma_points) {
      point.median_ms = median(point.runs_ms);
      if (progress) progress(point.method + " gamma " + std::to_string(gamma) + ": " + std::to_string(point.median_ms) + " ms");
      points.push_back(std::move(point));
    }
  }
  return points;
}

}  // namespace dspark::bench
