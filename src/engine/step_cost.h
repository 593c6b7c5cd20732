// The measured cost of one engine step, from which the schedulers' SPS(B) table is built
// (dspark-method 4.3): the target's verify forward as a function of B, the total tokens sent
// (every request's anchor plus its verified drafts), and the batched drafting call as a function
// of R, the requests drafting. A step at R requests and B tokens takes draft(R) + verify(B), so
// SPS(B) at the current R is 1 / (draft(R) + verify(B)).
//
// Both curves are kept exactly as measured (no smoothing): the async scheduler's global search is
// there to cross their cliffs. Profiled by `dspark profile` or at engine start-up, cached on disk
// keyed by model and machine (schedule::SpsMeta).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "draft/drafter.h"
#include "model/transformer.h"
#include "schedule/sps_table.h"

namespace dspark::engine {

struct StepCost {
  std::vector<double> verify_seconds;  // [max_tokens]: entry B-1 is verify(B)
  std::vector<double> draft_seconds;   // [max_requests]: entry R-1 is draft(R); empty without a drafter
  schedule::SpsMeta meta;
  int64_t context = 0;                 // cached positions per request while measuring
  int64_t gamma = 0;                   // drafts per request while measuring

  // The SPS table the schedulers read while `n_requests` requests draft (0: no drafting cost).
  schedule::SpsTable sps_for(int64_t n_requests) const;
  // draft(R) as the schedulers take it: 0 for R = 0 or without a drafter, R clamped to the profile.
  double draft_cost(int64_t n_requests) const;
  // draft(R) + verify(B), the step time the schedulers plan with; 0 for a B the profile lacks.
  double step_seconds(int64_t n_requests, int64_t n_tokens) const;

  nlohmann::json to_json() const;
  static StepCost from_json(const nlohmann::json& json, const std::string& source);
  static StepCost load(const std::filesystem::path& path);
  void save(const std::filesystem::path& path) const;
};

struct ProfileOptions {
  int64_t max_requests = 64;   // R = 1..max_requests
  int64_t gamma = 7;           // B = 1..max_requests * (gamma + 1)
  int64_t context = 256;       // positions already cached per request, as in a running server
  int64_t runs = 5;            // median of this many timed passes over all points, after a warm-up pass
  bool quiet = false;          // no progress line
};

// Measures both curves on the real target (and drafter, if given). The drafter must have at least
// max_requests slots; the target's cache is the profiler's own.
StepCost profile_step_cost(model::Transformer& target, draft::Drafter* drafter, const ProfileOptions& options,
                           const schedule::SpsMeta& meta);

// The setup a profile is valid for: model directory name + content size, host name, device, dtype.
schedule::SpsMeta step_cost_meta(const std::string& model_dir, const model::Transformer& target,
                                 const std::string& drafter_dir);

// The cached profile for `meta` under cache_dir, measured (and saved) if missing or stale.
StepCost cached_step_cost(const std::filesystem::path& cache_dir, model::Transformer& target, draft::Drafter* drafter,
                          const ProfileOptions& options, const schedule::SpsMeta& meta);

// $DSPARK_CACHE, else $XDG_CACHE_HOME/dspark, else ~/.cache/dspark.
std::filesystem::path default_cache_dir();

}  // namespace dspark::engine
