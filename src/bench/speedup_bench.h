// `dspark bench speedup`: end-to-end speed of single requests, autoregressive decoding against
// speculative methods, measured side by side. Every prompt runs under every method back to back,
// the order rotating from prompt to prompt so no method always runs first (the second of two
// back-to-back runs measured a few percent slower here, whichever it was); so each prompt gives
// one paired ratio per method, and the machine's drift from minute to minute cancels in it.
// Prompts are the first user turn of each line of a prompt file, rendered with the chat template
// (as bench accept's). Tokens per second are end to end: generated tokens over the time from
// submission to the last token, prefill (and the drafter's) included.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "draft/drafter.h"
#include "engine/request_stats.h"
#include "engine/step_cost.h"
#include "model/transformer.h"
#include "schedule/schedule_kind.h"

namespace dspark::bench {

// One way of generating: autoregressive when drafter is null.
struct SpeedupMethod {
  std::string label;
  draft::Drafter* drafter = nullptr;  // not owned
  int64_t gamma = 0;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::kNone;
  const engine::StepCost* step_cost = nullptr;  // what the dspark schedules need (not owned)
};

struct SpeedupOptions {
  std::vector<double> temperatures = {0.0, 1.0};
  int64_t max_tokens = 128;
  uint64_t seed = 0;  // prompt i samples with seed + i, under every method
  bool ignore_eos = false;
};

// One request: prompt `prompt` of file `file` under method `method` at `temperature`.
struct SpeedupRun {
  int64_t method = 0, file = 0, prompt = 0;
  double temperature = 0;
  engine::RequestStats stats;
};

// prompts[f]: file f's prompts as token ids. stop_ids end a request unless options.ignore_eos.
// on_run(n) after the n-th request. Methods[0] is the baseline of the report, by convention.
std::vector<SpeedupRun> run_speedup(model::Transformer& target, const std::vector<SpeedupMethod>& methods,
                                    const std::vector<std::vector<std::vector<int64_t>>>& prompts,
                                    const std::vector<int64_t>& stop_ids, const SpeedupOptions& options,
                                    const std::function<void(int64_t)>& on_run = {});

// One method on one file (or on all files, file = -1) at one temperature.
struct SpeedupCell {
  int64_t method = 0, file = -1;
  double temperature = 0;
  int64_t prompts = 0;
  double tokens_per_second = 0;   // pooled: generated tokens over seconds, summed over prompts
  double acceptance_length = 1;   // tau, pooled over the prompts' decode steps
  double ratio = 1;               // median over prompts of tokens/s against the baseline's on that prompt
  double ratio_low = 1, ratio_high = 1;  // 95% bootstrap interval of that median (1000 resamples, seed 0)
};

// Cells for every method, temperature and file, then the all-files pool, baseline = method 0.
std::vector<SpeedupCell> summarize_speedup(const std::vector<SpeedupRun>& runs, int64_t methods, int64_t files);

struct SpeedupReport {
  std::vector<std::string> methods, files;
  SpeedupOptions options;
  std::vector<SpeedupCell> cells;
  std::string markdown() const;
  nlohmann::json to_json() const;
};

}  // namespace dspark::bench
