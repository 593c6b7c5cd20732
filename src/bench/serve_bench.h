// `dspark bench serve`: closed-loop clients over the batched engine (dspark-method 8, the paper's
// Figures 7 and 8). At concurrency C, C clients each keep one request in flight: when one
// finishes, its client submits the next prompt. Request i of a point always uses prompt
// i mod n_prompts and seed i, so every schedule serves the same workload.
//
// Per point: aggregate output tokens/s (all generated tokens / wall time), per-user tokens/s
// (a request's generated tokens / its time from submission to its last token: mean, p50, p90),
// the mean verification budget (drafts verified per request per step), the acceptance length
// (tokens committed per request per step, bonus included), and the share of the time spent drafting.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "draft/drafter.h"
#include "engine/engine.h"
#include "model/transformer.h"

namespace dspark::bench {

struct ServeOptions {
  // Requests per point: max(min_requests, C x requests_per_client). Enough that one point runs
  // for about a second at low concurrency: a fresh engine's fixed costs (dspark-async's first
  // probes, each drafting a whole prompt's backlog) must not dominate it.
  int64_t requests_per_client = 4;
  int64_t min_requests = 32;
  int64_t max_tokens = 128;
  int64_t gamma = 7;
  double threshold = 0.5;           // `threshold` schedule
  bool fixed_profile = false;       // plan with the profile as measured, not rescaled by the steps' times
  sampling::SamplingParams sampling{.temperature = 1.0};
  std::vector<int64_t> stop_ids;
  // Called after every engine step with the point's schedule and concurrency (the step log).
  std::function<void(const std::string& schedule, int64_t concurrency, const engine::StepTiming&)> on_step;
};

struct ServePoint {
  std::string schedule;
  int64_t concurrency = 0, requests = 0, output_tokens = 0;
  double seconds = 0;
  double aggregate_tps = 0;
  double user_tps_mean = 0, user_tps_p50 = 0, user_tps_p90 = 0;
  double mean_budget = 0;        // drafts verified per request-step
  double acceptance_length = 0;  // tokens committed per request-step
  double draft_share = 0;        // share of the wall time spent in drafting calls
  // The schedules' cost model against the clock, over the decode steps (no prefill in them) that
  // the profile covers: the median of measured / predicted step time (the profile rescaled by the
  // earlier steps, engine/step_cost_drift.h), and the share of those steps within 10% of their
  // prediction; profile_ratio: the median against the profile as measured, without rescaling.
  int64_t cost_model_steps = 0;
  double cost_model_ratio = 0, cost_model_within_10 = 0, profile_ratio = 0;
  int64_t runs = 1;              // runs this point is the median of
};

// The median of several runs of one point, metric by metric (tokens and seconds summed).
ServePoint median_point(const std::vector<ServePoint>& runs);

// One (schedule, concurrency) point. drafter may be null for `none`; step_cost must cover
// concurrency x (gamma + 1) tokens for dspark-sync / dspark-async.
ServePoint run_serve_point(model::Transformer& target, draft::Drafter* drafter, const engine::StepCost& step_cost,
                           schedule::ScheduleKind kind, int64_t concurrency,
                           const std::vector<std::vector<int64_t>>& prompts, const ServeOptions& options);

// Every (schedule, concurrency) point, `repeats` runs each, reported as the median of its runs
// (median_point), grouped by schedule in the order given. The schedules take turns at each
// concurrency, repeat after repeat, so a drift of the machine's speed hits them alike; one short
// unmeasured run warms up first. on_run(point, repeat) after every run.
std::vector<ServePoint> run_serve_sweep(model::Transformer& target, draft::Drafter* drafter,
                                        const engine::StepCost& step_cost,
                                        const std::vector<schedule::ScheduleKind>& kinds,
                                        const std::vector<int64_t>& concurrencies,
                                        const std::vector<std::vector<int64_t>>& prompts, const ServeOptions& options,
                                        int64_t repeats,
                                        const std::function<void(const ServePoint&, int64_t)>& on_run = {});

}  // namespace dspark::bench
