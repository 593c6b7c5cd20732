#include "bench/speedup_bench.h"

#include <algorithm>
#include <map>
#include <memory>

#include "bench/median.h"
#include "bench/printf_string.h"
#include "common/error.h"
#include "engine/engine.h"
#include "sampling/rng.h"

namespace dspark::bench {

namespace {

double tokens_per_second(const engine::RequestStats& s) {
  return s.seconds > 0 ? static_cast<double>(s.generated_tokens) / s.seconds : 0.0;
}

// The 2.5th and 97.5th percentiles of the median of `ratios` resampled with replacement.
std::pair<double, double> bootstrap_median_interval(const std::vector<double>& ratios) {
  constexpr int kResamples = 1000;
  if (ratios.size() < 2) return {median(ratios), median(ratios)};
  sampling::Rng rng(0);
  std::vector<double> medians, sample(ratios.size());
  for (int r = 0; r < kResamples; ++r) {
    for (double& v : sample) v = ratios[static_cast<size_t>(rng.uniform() * static_cast<double>(ratios.size()))];
    medians.push_back(median(sample));
  }
  std::sort(medians.begin(), medians.end());
  return {medians[kResamples * 25 / 1000], medians[kResamples * 975 / 1000 - 1]};
}

}  // namespace

std::vector<SpeedupRun> run_speedup(model::Transformer& target, const std::vector<SpeedupMethod>& methods,
                                    const std::vector<std::vector<std::vector<int64_t>>>& prompts,
                                    const std::vector<int64_t>& stop_ids, const SpeedupOptions& o,
                                    const std::function<void(int64_t)>& on_run) {
  if (methods.empty()) throw Error("bench speedup: no methods");
  int64_t longest = 0;
  for (const auto& file : prompts)
    for (const auto& ids : file) longest = std::max<int64_t>(longest, static_cast<int64_t>(ids.size()));
  // One engine per method, each holding one request at a time, built once: the KV caches are
  // allocated before the first timed request.
  std::vector<std::unique_ptr<engine::Engine>> engines;
  for (const SpeedupMethod& m : methods)
    engines.push_back(std::make_unique<engine::Engine>(
        target, m.drafter,
        engine::EngineOptions{.max_concurrency = 1, .max_context = longest + o.max_tokens, .gamma = m.gamma,
                              .schedule = m.schedule, .step_cost = m.step_cost}));
  std::vector<SpeedupRun> runs;
  const auto n_methods = static_cast<int64_t>(methods.size());
  for (double temperature : o.temperatures)
    for (size_t f = 0; f < prompts.size(); ++f)
      for (size_t i = 0; i < prompts[f].size(); ++i)
        for (int64_t turn = 0; turn < n_methods; ++turn) {
          const int64_t m = (static_cast<int64_t>(i) + turn) % n_methods;  // rotates the order per prompt
          engine::EngineRequest request;
          request.prompt_ids = prompts[f][i];
          request.sampling = {.temperature = temperature, .seed = o.seed + i};
          request.max_tokens = o.max_tokens;
          if (!o.ignore_eos) request.stop_ids = stop_ids;
          engines[static_cast<size_t>(m)]->submit(std::move(request));
          const std::vector<engine::RequestOutcome> done = engines[static_cast<size_t>(m)]->run();
          DSPARK_ASSERT(done.size() == 1);
          runs.push_back({m, static_cast<int64_t>(f), static_cast<int64_t>(i), temperature, done[0].stats});
          if (on_run) on_run(static_cast<int64_t>(runs.size()));
        }
  return runs;
}

std::vector<SpeedupCell> summarize_speedup(const std::vector<SpeedupRun>& runs, int64_t methods, int64_t files) {
  // The baseline's tokens/s per (temperature, file, prompt), to pair each run with.
  std::map<std::tuple<double, int64_t, int64_t>, double> baseline;
  std::vector<double> temperatures;
  for (const SpeedupRun& r : runs) {
    if (r.method == 0) baseline[{r.temperature, r.file, r.prompt}] = tokens_per_second(r.stats);
    if (std::find(temperatures.begin(), temperatures.end(), r.temperature) == temperatures.end())
      temperatures.push_back(r.temperature);
  }
  std::vector<SpeedupCell> cells;
  for (double temperature : temperatures)
    for (int64_t file = 0; file <= files; ++file) {
      const int64_t which = file == files ? -1 : file;  // the last pass pools every file
      for (int64_t m = 0; m < methods; ++m) {
        engine::RequestStats pooled;
        std::vector<double> ratios;
        for (const SpeedupRun& r : runs) {
          if (r.method != m || r.temperature != temperature || (which >= 0 && r.file != which)) continue;
          pooled.merge(r.stats);
          const auto base = baseline.find({r.temperature, r.file, r.prompt});
          if (base != baseline.end() && base->second > 0) ratios.push_back(tokens_per_second(r.stats) / base->second);
        }
        if (ratios.empty()) continue;
        const auto [low, high] = bootstrap_median_interval(ratios);
        cells.push_back({.method = m,
                         .file = which,
                         .temperature = temperature,
                         .prompts = static_cast<int64_t>(ratios.size()),
                         .tokens_per_second = tokens_per_second(pooled),
                         .acceptance_length = pooled.num_steps > 0 ? pooled.acceptance_length() : 1.0,
                         .ratio = median(ratios),
                         .ratio_low = low,
                         .ratio_high = high});
      }
    }
  return cells;
}

std::string SpeedupReport::markdown() const {
  std::string s = printf_string("Single requests, up to %lld new tokens, end-to-end tokens/s (prefill included); "
                                "speedup: median over prompts of tokens/s against %s on the same prompt, run back "
                                "to back [95%% bootstrap interval]\n",
                                static_cast<long long>(options.max_tokens), methods.front().c_str());
  const auto n_files = static_cast<int64_t>(files.size());
  for (double temperature : options.temperatures) {
    s += printf_string("\nT = %.2f\n\n| method | file | prompts | tokens/s | tau | speedup |\n|---|---|---|---|---|---|\n",
                       temperature);
    for (int64_t file = 0; file <= n_files; ++file)
      for (const SpeedupCell& c : cells) {
        if (c.temperature != temperature || c.file != (file == n_files ? -1 : file)) continue;
        const std::string where = c.file < 0 ? "**all**" : files[static_cast<size_t>(c.file)];
        s += printf_string("| %s | %s | %lld | %.1f | %.2f | %s%.2fx [%.2f, %.2f]%s |\n",
                           methods[static_cast<size_t>(c.method)].c_str(), where.c_str(),
                           static_cast<long long>(c.prompts), c.tokens_per_second, c.acceptance_length,
                           c.file < 0 ? "**" : "", c.ratio, c.ratio_low, c.ratio_high, c.file < 0 ? "**" : "");
      }
  }
  return s;
}

nlohmann::json SpeedupReport::to_json() const {
  nlohmann::json out = {{"methods", methods},
                        {"files", files},
                        {"temperatures", options.temperatures},
                        {"max_tokens", options.max_tokens},
                        {"ignore_eos", options.ignore_eos},
                        {"baseline", methods.front()},
                        {"cells", nlohmann::json::array()}};
  for (const SpeedupCell& c : cells)
    out["cells"].push_back({{"method", methods[static_cast<size_t>(c.method)]},
                            {"file", c.file < 0 ? "all" : files[static_cast<size_t>(c.file)]},
                            {"temperature", c.temperature},
                            {"prompts", c.prompts},
                            {"tokens_per_second", c.tokens_per_second},
                            {"acceptance_length", c.acceptance_length},
                            {"speedup", c.ratio},
                            {"speedup_low", c.ratio_low},
                            {"speedup_high", c.ratio_high}});
  return out;
}

}  // namespace dspark::bench
