// The measured cost of one engine step, from which the schedulers' SPS(B) table is built
// (dspark-method 4.3): the target's verify step as a function of B, the total tokens sent
// (every request's anchor plus its verified drafts), and the batched drafting call as a function
// of R, the requests drafting. A step at R requests and B tokens takes draft(R) + verify(B), so
// SPS(B) at the current R is 1 / (draft(R) + verify(B)).
//
// Each curve times what the engine's step does, not only the forward:
//   verify(B)  the target forward (capturing the drafter's layers), the captured features, and
//              every request's rejection sampling over its rows;
//   draft(R)   R requests each handing the drafter the features of the tokens its last step
//              committed, then one proposal call, which projects those features into the draft
//              cache (the context projection) before drafting the block.
// A step's make-up matters as well as its size: verify(B) is measured with B tokens spread over
// the fewest requests a step at gamma can hold them in, and B requests sending one token each
// (plain_verify) cost more, since each reads its own KV cache. The difference gives a per-request
// cost that verify_cost adds for the requests a real step has beyond the measured ones.
//
// Both curves are kept exactly as measured (no smoothing): the async scheduler's global search is
// there to cross their cliffs. Profiled by `dspark profile` or at engine start-up, cached on disk
// keyed by model, machine and dspark build (schedule::SpsMeta).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "draft/drafter.h"
#include "model/transformer.h"
#include "schedule/sps_table.h"

namespace dspark::engine {

struct StepCost {
  std::vector<double> verify_seconds;        // [max_tokens]: entry B-1 is verify(B), over ceil(B / (gamma + 1)) requests
  std::vector<double> plain_verify_seconds;  // [max_requests]: entry n-1 is n requests sending one token each;
                                             // empty (an older profile): no per-request cost is added
  std::vector<double> draft_seconds;         // [max_requests]: entry R-1 is draft(R); empty without a drafter
  schedule::SpsMeta meta;
  int64_t context = 0;                 // cached positions per request while measuring
  int64_t gamma = 0;                   // drafts per request while measuring

  // The SPS table the schedulers read while `n_requests` requests decode and draft: entry B is
  // 1 / (draft(n) + verify_cost(B, n)). n_requests = 0: a step without drafting, where B
  // requests send one token each (entry B is 1 / plain_cost(B)). The scales multiply the two
  // parts (engine/step_cost_drift.h keeps them true to the machine's minute).
  schedule::SpsTable sps_for(int64_t n_requests, double draft_scale = 1, double verify_scale = 1) const;
  // draft(R) as the schedulers take it: 0 for R = 0 or without a drafter, R clamped to the profile.
  double draft_cost(int64_t n_requests) const;
  // verify(B) for B tokens over n requests: verify(B) plus the per-request cost of the requests
  // beyond the ceil(B / (gamma + 1)) it was measured with; 0 for a B the profile lacks.
  double verify_cost(int64_t n_tokens, int64_t n_requests) const;
  // A step of n requests sending one token each, none drafting: plain_verify as measured (it
  // follows steps like it, with no drafting call between to evict the target from the caches),
  // else verify_cost(n, n).
  double plain_cost(int64_t n_requests) const;
  // A step's part beyond the drafting call: verify_cost(B, n), or plain_cost(n) for a step that
  // drafted nothing and verifies no drafts; 0 for a B the profile lacks.
  double rest_seconds(int64_t n_drafting, int64_t n_tokens, int64_t n_requests) const;
  // draft(R) + rest_seconds, each part times its scale: the step time the schedulers plan with;
  // 0 for a B the profile lacks.
  double step_seconds(int64_t n_drafting, int64_t n_tokens, int64_t n_requests, double draft_scale = 1,
                      double verify_scale = 1) const;

  nlohmann::json to_json() const;
  static StepCost from_json(const nlohmann::json& json, const std::string& source);
  static StepCost load(const std::filesystem::path& path);
  void save(const std::filesystem::path& path) const;

 private:
  int64_t measured_requests(int64_t n_tokens) const;  // ceil(B / (gamma + 1)), as the profile spread B
  double per_request_seconds(int64_t n_requests) const;
};

struct ProfileOptions {
  int64_t max_requests = 64;   // R = 1..max_requests
  int64_t gamma = 7;           // B = 1..max_requests * (gamma + 1)
  int64_t context = 256;       // positions already cached per request, as in a running server
  int64_t runs = 3;            // passes over all points, after a warm-up pass (1-3 timed steps of each per pass)
  // Tokens each drafting request commits before a timed proposal (the anchor plus accepted
  // drafts of its last step); 0: (gamma + 1) / 2, half a block.
  int64_t committed = 0;
  bool quiet = false;          // no progress line
};

// Measures both curves on the real target (and drafter, if given). The drafter must have at least
// max_requests slots; the target's cache is the profiler's own.
StepCost profile_step_cost(model::Transformer& target, draft::Drafter* drafter, const ProfileOptions& options,
                           const schedule::SpsMeta& meta);

// The context to profile a workload at: its prompts' median length plus half the new tokens, to
// the nearest power of two (so similar workloads share one profile), at most max(longest prompt +
// max_tokens, 256), the room a drafter sized for the workload has (cli's drafter_capacity).
int64_t typical_context(const std::vector<std::vector<int64_t>>& prompts, int64_t max_tokens);

// The setup a profile is valid for: model directory name + content size, host name, device, dtype
// (the target's, and the drafter's when it is loaded in another than its checkpoint's), and the
// running executable (its size and modification time).
schedule::SpsMeta step_cost_meta(const std::string& model_dir, const model::Transformer& target,
                                 const std::string& drafter_dir,
                                 model::WeightDType drafter_dtype = model::WeightDType::kAuto);

// A point of a cached profile timed again on the machine as it is now.
struct SpotCheckPoint {
  std::string label;  // "verify(1)", "verify(8)" (gamma + 1 at gamma 7), "draft(1)"; "plain(1)" without a drafter
  double profiled_seconds = 0;
  double measured_seconds = 0;
};

// Times one request's points of `cost` again as profile_step_cost measures them (a warm-up pass,
// then the median of three): verify(1), verify(gamma + 1) (one request's full block) and draft(1)
// with a drafter; plain(1) and verify(gamma + 1) without. A second or two on a 0.6B-shape model.
std::vector<SpotCheckPoint> spot_check_step_cost(const StepCost& cost, model::Transformer& target,
                                                 draft::Drafter* drafter, const ProfileOptions& options);

// The first point the machine now runs in under `ratio` of the profile's time, if any. A profile
// measured while something else ran keeps that run's slowness in its curves, unevenly (a burst
// can inflate verify(1..8) 2x and leave the rest), and the engine's drift rescaling corrects the
// curves' level, not their shape: with such a profile dspark-sync verified DFlash's blocks short
// (1.33x AR where the undisturbed profile gave 1.64x). A point slower now than profiled is the
// present machine's load, which the rescaling follows, so only overstated points count.
std::optional<SpotCheckPoint> first_overstated_point(const std::vector<SpotCheckPoint>& points, double ratio);

// A cached point at least 1.5x slower than the machine is now marks the profile as measured under
// load. Run-to-run spread on a shared machine is 10-15%, and the spot check can read small points
// up to 15% below the full profile (no large point runs before them to leave its debris in the
// caches: verify(1) 3.7 ms against 4.3 ms on target-20l once, 4.3 against 4.0 another time), so
// 1.5x leaves margin for a machine faster now than when it was profiled, and still catches the 2x
// a busy neighbour caused.
inline constexpr double kOverstatedRatio = 2.0 / 3.0;

// The cached profile for `meta` under cache_dir, measured (and saved) if missing, stale, or
// overstating what the machine's steps cost now (spot_check_step_cost, first_overstated_point).
StepCost cached_step_cost(const std::filesystem::path& cache_dir, model::Transformer& target, draft::Drafter* drafter,
                          const ProfileOptions& options, const schedule::SpsMeta& meta);

// $DSPARK_CACHE, else $XDG_CACHE_HOME/dspark, else ~/.cache/dspark.
std::filesystem::path default_cache_dir();

}  // namespace dspark::engine
