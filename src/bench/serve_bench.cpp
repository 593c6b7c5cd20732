#include "bench/serve_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "bench/median.h"
#include "common/error.h"

namespace dspark::bench {

namespace {

// The q-quantile of values (nearest rank; values not empty).
double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
  return values[i];
}

}  // namespace

ServePoint median_point(const std::vector<ServePoint>& runs) {
  if (runs.empty()) throw Error("bench serve: no runs to take the median of");
  ServePoint m = runs.front();
  m.requests = m.output_tokens = 0;
  m.seconds = 0;
  for (const ServePoint& r : runs) {
    m.requests += r.requests;
    m.output_tokens += r.output_tokens;
    m.seconds += r.seconds;
  }
  auto med = [&](double ServePoint::*field) {
    std::vector<double> values;
    for (const ServePoint& r : runs) values.push_back(r.*field);
    return median(values);
  };
  m.aggregate_tps = med(&ServePoint::aggregate_tps);
  m.user_tps_mean = med(&ServePoint::user_tps_mean);
  m.user_tps_p50 = med(&ServePoint::user_tps_p50);
  m.user_tps_p90 = med(&ServePoint::user_tps_p90);
  m.mean_budget = med(&ServePoint::mean_budget);
  m.acceptance_length = med(&ServePoint::acceptance_length);
  m.draft_share = med(&ServePoint::draft_share);
  m.cost_model_ratio = med(&ServePoint::cost_model_ratio);
  m.cost_model_within_10 = med(&ServePoint::cost_model_within_10);
  m.profile_ratio = med(&ServePoint::profile_ratio);
  m.cost_model_steps = 0;
  for (const ServePoint& r : runs) m.cost_model_steps += r.cost_model_steps;
  m.runs = static_cast<int64_t>(runs.size());
  return m;
}

ServePoint run_serve_point(model::Transformer& target, draft::Drafter* drafter, const engine::StepCost& step_cost,
                           schedule::ScheduleKind kind, int64_t concurrency,
                           const std::vector<std::vector<int64_t>>& prompts, const ServeOptions& o) {
  if (prompts.empty()) throw Error("bench serve: no prompts");
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  engine::Engine engine(target, drafter, {.max_concurrency = concurrency, .max_context = longest + o.max_tokens,
                                               .gamma = o.gamma, .schedule = kind, .threshold = o.threshold,
                                               .step_cost = &step_cost, .rescale_step_cost = !o.fixed_profile});
  const int64_t n_requests = std::max(o.min_requests, concurrency * o.requests_per_client);
  int64_t submitted = 0;
  auto submit_next = [&] {
    engine::EngineRequest r{prompts[submitted % prompts.size()], o.sampling, o.max_tokens, o.stop_ids};
    r.sampling.seed = o.sampling.seed + static_cast<uint64_t>(submitted);
    engine.submit(std::move(r));
    ++submitted;
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < concurrency && submitted < n_requests; ++c) submit_next();
  ServePoint point;
  point.schedule = schedule::schedule_kind_name(kind);
  point.concurrency = concurrency;
  std::vector<double> user_tps, cost_ratios, profile_ratios;
  while (!engine.idle()) {
    const std::vector<engine::RequestOutcome> finished = engine.step();
    const engine::StepTiming& timing = engine.last_step();
    if (timing.prefill_tokens == 0 && timing.predicted_seconds > 0) {
      cost_ratios.push_back(timing.seconds / timing.predicted_seconds);
      profile_ratios.push_back(timing.seconds / timing.profile_seconds);
    }
    if (o.on_step) o.on_step(point.schedule, concurrency, timing);
    for (const engine::RequestOutcome& done : finished) {
      const int64_t n = done.stats.generated_tokens;
      point.output_tokens += n;
      if (done.stats.seconds > 0 && n > 0) user_tps.push_back(static_cast<double>(n) / done.stats.seconds);
      if (submitted < n_requests) submit_next();  // the client's next request
    }
  }
  point.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  point.requests = n_requests;
  point.aggregate_tps = static_cast<double>(point.output_tokens) / point.seconds;
  if (!user_tps.empty()) {
    double sum = 0;
    for (double v : user_tps) sum += v;
    point.user_tps_mean = sum / static_cast<double>(user_tps.size());
    point.user_tps_p50 = quantile(user_tps, 0.5);
    point.user_tps_p90 = quantile(user_tps, 0.9);
  }
  point.mean_budget = engine.stats().mean_budget();
  point.acceptance_length = engine.stats().acceptance_length();
  point.draft_share = engine.stats().draft_seconds / point.seconds;
  point.cost_model_steps = static_cast<int64_t>(cost_ratios.size());
  if (!cost_ratios.empty()) {
    point.cost_model_ratio = median(cost_ratios);
    point.profile_ratio = median(profile_ratios);
    point.cost_model_within_10 =
        static_cast<double>(std::count_if(cost_ratios.begin(), cost_ratios.end(),
                                          [](double r) { return std::abs(r - 1.0) <= 0.1; })) /
        static_cast<double>(cost_ratios.size());
  }
  return point;
}

std::vector<ServePoint> run_serve_sweep(model::Transformer& target, draft::Drafter* drafter,
                                        const engine::StepCost& step_cost,
                                        const std::vector<schedule::ScheduleKind>& kinds,
                                        const std::vector<int64_t>& concurrencies,
                                        const std::vector<std::vector<int64_t>>& prompts, const ServeOptions& o,
                                        int64_t repeats, const std::function<void(const ServePoint&, int64_t)>& on_run) {
  if (repeats < 1) throw Error("bench serve: --repeats must be >= 1");
  if (kinds.empty() || prompts.empty()) throw Error("bench serve: no schedules or no prompts");
  run_serve_point(target, drafter, step_cost, kinds[0], 1, {prompts[0]}, {.min_requests = 1, .max_tokens = 8});
  std::vector<std::vector<ServePoint>> by_kind(kinds.size());
  for (int64_t c : concurrencies) {
    std::vector<std::vector<ServePoint>> runs(kinds.size());
    for (int64_t rep = 0; rep < repeats; ++rep)
      for (size_t k = 0; k < kinds.size(); ++k) {
        runs[k].push_back(run_serve_point(target, drafter, step_cost, kinds[k], c, prompts, o));
        if (on_run) on_run(runs[k].back(), rep);
      }
    for (size_t k = 0; k < kinds.size(); ++k) by_kind[k].push_back(median_point(runs[k]));
  }
  std::vector<ServePoint> points;
  for (const auto& kind_points : by_kind) points.insert(points.end(), kind_points.begin(), kind_points.end());
  return points;
}

}  // namespace dspark::bench
