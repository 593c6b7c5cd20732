#include "engine/step_cost.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <optional>
#include <set>
#include <span>

#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "sampling/verify.h"

namespace dspark::engine {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double StepCost::draft_cost(int64_t n_requests) const {
  return n_requests <= 0 || draft_seconds.empty()
             ? 0.0
             : draft_seconds[std::min<size_t>(static_cast<size_t>(n_requests), draft_seconds.size()) - 1];
}

int64_t StepCost::measured_requests(int64_t n_tokens) const { return (n_tokens + gamma) / (gamma + 1); }

// (plain(n) - verify(n)) over the n - ceil(n / (gamma + 1)) requests the plain step has more; n is
// clamped to the profile, and a negative difference (noise) counts as 0.
double StepCost::per_request_seconds(int64_t n_requests) const {
  const auto n = std::min<int64_t>(n_requests, static_cast<int64_t>(plain_verify_seconds.size()));
  if (n < 2 || n > static_cast<int64_t>(verify_seconds.size())) return 0.0;
  const int64_t extra = n - measured_requests(n);
  if (extra <= 0) return 0.0;
  const auto i = static_cast<size_t>(n - 1);
  return std::max(0.0, plain_verify_seconds[i] - verify_seconds[i]) / static_cast<double>(extra);
}

double StepCost::verify_cost(int64_t n_tokens, int64_t n_requests) const {
  if (n_tokens < 1 || n_tokens > static_cast<int64_t>(verify_seconds.size())) return 0;
  const int64_t extra = std::max<int64_t>(0, n_requests - measured_requests(n_tokens));
  return verify_seconds[static_cast<size_t>(n_tokens - 1)] + static_cast<double>(extra) * per_request_seconds(n_requests);
}

double StepCost::plain_cost(int64_t n_requests) const {
  if (n_requests >= 1 && n_requests <= static_cast<int64_t>(plain_verify_seconds.size()))
    return plain_verify_seconds[static_cast<size_t>(n_requests - 1)];
  return verify_cost(n_requests, n_requests);
}

double StepCost::rest_seconds(int64_t n_drafting, int64_t n_tokens, int64_t n_requests) const {
  if (n_drafting == 0 && n_tokens == n_requests) return plain_cost(n_requests);
  return verify_cost(n_tokens, n_requests);
}

double StepCost::step_seconds(int64_t n_drafting, int64_t n_tokens, int64_t n_requests, double draft_scale,
                              double verify_scale) const {
  const double rest = rest_seconds(n_drafting, n_tokens, n_requests);
  return rest > 0 ? draft_scale * draft_cost(n_drafting) + verify_scale * rest : 0.0;
}

schedule::SpsTable StepCost::sps_for(int64_t n_requests, double draft_scale, double verify_scale) const {
  const double draft = draft_scale * draft_cost(n_requests);
  std::vector<double> sps(verify_seconds.size());
  for (size_t b = 0; b < sps.size(); ++b) {
    const auto B = static_cast<int64_t>(b) + 1;
    sps[b] = 1.0 / (n_requests > 0 ? draft + verify_scale * verify_cost(B, n_requests) : verify_scale * plain_cost(B));
  }
  return schedule::SpsTable(std::move(sps), meta);
}

json StepCost::to_json() const {
  return {{"format", "dspark-step-cost"}, {"version", 1},
          {"sps_meta", schedule::SpsTable({1.0}, meta).to_json()},
          {"context", context}, {"gamma", gamma},
          {"verify_seconds", verify_seconds}, {"plain_verify_seconds", plain_verify_seconds},
          {"draft_seconds", draft_seconds}};
}

StepCost StepCost::from_json(const json& j, const std::string& source) {
  try {
    if (!j.is_object() || j.value("format", json()) != "dspark-step-cost")
      throw Error(source + ": not a dspark step-cost profile (no \"format\": \"dspark-step-cost\"; make one with `dspark profile --out`)");
    StepCost c;
    c.meta = schedule::SpsTable::from_json(j.at("sps_meta"), source).meta();
    c.context = j.at("context").get<int64_t>();
    c.gamma = j.at("gamma").get<int64_t>();
    if (c.gamma < 0) throw Error(source + ": gamma must be >= 0");
    c.verify_seconds = j.at("verify_seconds").get<std::vector<double>>();
    c.plain_verify_seconds = j.value("plain_verify_seconds", std::vector<double>());
    c.draft_seconds = j.at("draft_seconds").get<std::vector<double>>();
    for (const auto* curve : {&c.verify_seconds, &c.plain_verify_seconds, &c.draft_seconds})
      for (double s : *curve)
        if (!(s > 0)) throw Error(source + ": every measured time must be > 0");
    if (c.verify_seconds.empty()) throw Error(source + ": verify_seconds is empty");
    return c;
  } catch (const json::exception& e) {
    throw Error(source + ": " + e.what());
  }
}

StepCost StepCost::load(const fs::path& path) { return from_json(read_json_file(path), path.string()); }

void StepCost::save(const fs::path& path) const {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());  // a bare file name has none
  write_json_file(path, to_json());
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Wall time of run() on `device`, its queued work included (on CUDA the forward only enqueues it;
// a serving step waits for it when it reads the logits).
template <class F>
double seconds_of(const torch::Device& device, F&& run) {
  model::synchronize(device);
  const auto t0 = Clock::now();
  run();
  model::synchronize(device);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One point's stretch of steps within a pass: up to kUntimed untimed steps, then up to kTimed
// timed ones; `step` runs one step and returns the time of its measured call. Timed one step after
// the profile's largest point, the smallest points measured that point's debris (allocator,
// caches) for several steps: verify(1) 0.64 ms against 0.35 in the engine's steps, and 0.30-0.34
// after six steps of its own. A large point leaves nothing worth waiting out, and a stretch of it
// would cost minutes: each part of a stretch stops once its measured calls have taken 10 ms.
template <class F>
std::vector<double> run_stretch(F&& step) {
  constexpr int kUntimed = 3, kTimed = 3;
  constexpr double kStretchSeconds = 0.010;
  double spent = 0;
  for (int s = 0; s < kUntimed && (s == 0 || spent < kStretchSeconds); ++s) spent += step();
  std::vector<double> times;
  for (spent = 0; static_cast<int>(times.size()) < kTimed && (times.empty() || spent < kStretchSeconds);) {
    times.push_back(step());
    spent += times.back();
  }
  return times;
}

// Request r's share of B tokens over R requests: as even as possible, at least one each.
std::vector<int64_t> split_tokens(int64_t n_tokens, int64_t n_requests) {
  std::vector<int64_t> n(n_requests, n_tokens / n_requests);
  for (int64_t r = 0; r < n_tokens % n_requests; ++r) ++n[r];
  return n;
}

// The profile's target side: cached contexts in `slots`, and one verify step as the engine runs
// it (forward, captured features, each request's rejection sampling at T = 1 of its drafts
// against one-hot draft distributions, then the cache cut back to the context).
class VerifyBench {
 public:
  // One step's tokens: request r sends its anchor and shares[r] - 1 drafts.
  struct Point {
    model::ForwardBatch batch;
    std::vector<torch::Tensor> draft_probs;  // per request: [drafts, vocab] one-hot (undefined: none)
  };

  VerifyBench(model::Transformer& target, const ProfileOptions& o, const std::vector<int64_t>& layers)
      : target_(target), context_(o.context), layers_(layers),
        cache_(target.make_cache(o.max_requests, o.context + o.gamma + 2)) {
    const int64_t vocab = target.config().vocab_size;
    for (int64_t i = 0; i < o.context; ++i) context_ids_.push_back((i * 7919 + 13) % vocab);
    for (int64_t r = 0; r < o.max_requests; ++r) {
      slots_.push_back(*cache_.allocate());
      const model::ForwardOutput out = target.forward(cache_, {context_ids_, {{slots_.back(), o.context}}, {}, layers, false});
      if (r == 0) context_features_ = layers.empty() ? torch::empty({o.context, 0}) : out.captured_features();
    }
    rngs_.resize(static_cast<size_t>(o.max_requests));
  }

  Point point(const std::vector<int64_t>& shares) const {
    Point p;
    model::ForwardBatch& b = p.batch;
    for (size_t r = 0; r < shares.size(); ++r) {
      b.seqs.push_back({slots_[r], shares[r]});
      for (int64_t i = 0; i < shares[r]; ++i) {
        b.token_ids.push_back(context_ids_[(r + static_cast<size_t>(i)) % context_ids_.size()]);
        b.logit_rows.push_back(static_cast<int64_t>(b.logit_rows.size()));
      }
      torch::Tensor q;
      if (shares[r] > 1) {
        q = torch::zeros({shares[r] - 1, target_.config().vocab_size});
        for (int64_t k = 1; k < shares[r]; ++k) q[k - 1][b.token_ids[b.token_ids.size() - shares[r] + k]] = 1.0f;
      }
      p.draft_probs.push_back(q);
    }
    b.capture_layers = layers_;
    return p;
  }

  void step(const Point& p) {
    const model::ForwardOutput out = target_.forward(cache_, p.batch);
    if (!layers_.empty()) out.captured_features();
    int64_t row = 0;
    for (size_t r = 0; r < p.batch.seqs.size(); ++r) {
      const int64_t n = p.batch.seqs[r].n_new;
      const std::span<const int64_t> drafts(p.batch.token_ids.data() + row + 1, static_cast<size_t>(n - 1));
      sampling::verify_drafts(out.logits.narrow(0, row, n), drafts, p.draft_probs[r], params_, rngs_[r]);
      cache_.truncate(slots_[r], context_);
      row += n;
    }
  }

  const std::vector<int64_t>& context_ids() const { return context_ids_; }
  const torch::Tensor& context_features() const { return context_features_; }  // [context, m * hidden]

 private:
  model::Transformer& target_;
  int64_t context_;
  std::vector<int64_t> layers_;
  model::KvCache cache_;
  std::vector<int64_t> slots_, context_ids_;
  torch::Tensor context_features_;
  sampling::SamplingParams params_{.temperature = 1.0};
  std::vector<sampling::Rng> rngs_;
};

// The profile's drafter side: R requests each commit `committed` tokens with their features, then
// one proposal call drafts a block for each. Each slot started from the cached context; one that
// has grown by kGrowth positions starts again (untimed, and its context consumed by an untimed
// proposal), so the slots never outgrow the drafter's cache.
class DraftBench {
 public:
  DraftBench(draft::Drafter& drafter, const ProfileOptions& o, const VerifyBench& verify)
      : drafter_(drafter), o_(o), verify_(verify), grown_(static_cast<size_t>(o.max_requests), kGrowth) {
    const int64_t k = committed_per_step();
    const auto& ids = verify.context_ids();
    tokens_.assign(ids.begin(), ids.begin() + k);
    features_ = verify.context_features().narrow(0, 0, k).contiguous();
    rngs_.resize(static_cast<size_t>(o.max_requests));
  }

  ~DraftBench() {
    for (int64_t slot : started_) drafter_.end(slot);
  }

  // Untimed: restart the slots of the first R that would outgrow their room.
  void prepare(int64_t R) {
    std::vector<draft::DraftRequest> fresh;
    for (int64_t r = 0; r < R; ++r) {
      if (grown_[static_cast<size_t>(r)] + committed_per_step() <= kGrowth) continue;
      if (started_.count(r)) drafter_.end(r);
      drafter_.begin(r, verify_.context_ids(), verify_.context_features());
      started_.insert(r);
      grown_[static_cast<size_t>(r)] = 0;
      fresh.push_back(request(r));
    }
    if (!fresh.empty()) drafter_.propose(fresh);
  }

  void step(int64_t R) {
    std::vector<draft::DraftRequest> requests;
    for (int64_t r = 0; r < R; ++r) {
      drafter_.commit(r, tokens_, features_);
      grown_[static_cast<size_t>(r)] += committed_per_step();
      requests.push_back(request(r));
    }
    drafter_.propose(requests);
  }

 private:
  static constexpr int64_t kGrowth = 32;  // positions a slot may grow past its context (cache room: 64)

  int64_t committed_per_step() const {
    return std::clamp<int64_t>(o_.committed > 0 ? o_.committed : (o_.gamma + 1) / 2, 1, std::min(kGrowth, o_.context));
  }
  draft::DraftRequest request(int64_t r) {
    const auto& ids = verify_.context_ids();
    return {r, ids[static_cast<size_t>(r) % ids.size()], o_.gamma, 0.0, &params_, &rngs_[static_cast<size_t>(r)]};
  }

  draft::Drafter& drafter_;
  const ProfileOptions& o_;
  const VerifyBench& verify_;
  std::vector<int64_t> grown_;
  std::set<int64_t> started_;
  std::vector<int64_t> tokens_;
  torch::Tensor features_;
  sampling::SamplingParams params_{.temperature = 1.0};
  std::vector<sampling::Rng> rngs_;
};

// One verify point's stretch as the profile times it: a drafting step's verify follows a drafting
// call for the same requests (each evicts the other's weights from the caches; timed back to
// back, drafting measured 15% below the engine's); a plain step follows plain steps.
std::vector<double> verify_stretch(model::Transformer& target, VerifyBench& verify, DraftBench* drafting,
                                   const VerifyBench::Point& point) {
  const auto R = static_cast<int64_t>(point.batch.seqs.size());
  return run_stretch([&] {
    if (drafting) {
      drafting->prepare(R);
      drafting->step(R);
    }
    return seconds_of(target.device(), [&] { verify.step(point); });
  });
}

// draft(R)'s stretch: each drafting call follows the R requests' full verify step (full_block).
std::vector<double> draft_stretch(model::Transformer& target, VerifyBench& verify, DraftBench& drafting, int64_t R,
                                  const VerifyBench::Point& full_block) {
  return run_stretch([&] {
    drafting.prepare(R);
    verify.step(full_block);
    return seconds_of(target.device(), [&] { drafting.step(R); });
  });
}

}  // namespace

StepCost profile_step_cost(model::Transformer& target, draft::Drafter* drafter, const ProfileOptions& o,
                           const schedule::SpsMeta& meta) {
  if (o.max_requests < 1 || o.gamma < 0 || o.context < 1 || o.runs < 1 || o.committed < 0)
    throw Error("profile: --max-requests, --context and --runs must be >= 1, --gamma and --committed >= 0");
  const int64_t max_tokens = o.max_requests * (o.gamma + 1);
  VerifyBench verify(target, o, drafter ? drafter->target_layer_ids() : std::vector<int64_t>{});
  std::optional<DraftBench> drafting;
  if (drafter) drafting.emplace(*drafter, o, verify);

  StepCost cost;
  cost.meta = meta;
  cost.context = o.context;
  cost.gamma = o.gamma;
  // The points: verify(B) with B spread over as few requests as a step at gamma holds them in,
  // then n requests of one token each, then draft(R).
  std::vector<VerifyBench::Point> points;
  for (int64_t B = 1; B <= max_tokens; ++B)
    points.push_back(verify.point(split_tokens(B, std::min(o.max_requests, (B + o.gamma) / (o.gamma + 1)))));
  for (int64_t n = 1; n <= o.max_requests; ++n) points.push_back(verify.point(std::vector<int64_t>(n, 1)));
  const auto n_batches = static_cast<int64_t>(points.size());
  // o.runs passes over every point after one warm-up pass; the median per point. Interleaving the
  // repeats spreads a burst of machine noise over many points' samples instead of one point's
  // every sample. Within a pass a point runs as a stretch of steps (run_stretch), as the engine's
  // steady state does, each step preceded by what the engine's step around it would be
  // (verify_stretch, draft_stretch); a plain step (one token per request, no drafts) follows plain
  // steps, as when dspark-async's gate keeps the drafter off.
  const int64_t n_points = n_batches + (drafter ? o.max_requests : 0);
  Progress progress("profile", (o.runs + 1) * n_points, "point");
  std::vector<std::vector<double>> verify_samples(n_batches), draft_samples(drafter ? o.max_requests : 0);
  int64_t done = 0;
  for (int64_t pass = 0; pass <= o.runs; ++pass) {  // pass 0 warms up
    for (int64_t i = 0; i < n_batches; ++i) {
      DraftBench* before = drafting && i < max_tokens ? &*drafting : nullptr;
      const std::vector<double> times = verify_stretch(target, verify, before, points[i]);
      if (pass > 0) verify_samples[i].insert(verify_samples[i].end(), times.begin(), times.end());
      progress.update(++done);
    }
    for (int64_t R = 1; drafting && R <= o.max_requests; ++R) {
      const std::vector<double> times = draft_stretch(target, verify, *drafting, R, points[R * (o.gamma + 1) - 1]);
      if (pass > 0) draft_samples[R - 1].insert(draft_samples[R - 1].end(), times.begin(), times.end());
      progress.update(++done);
    }
  }
  for (int64_t i = 0; i < n_batches; ++i)
    (i < max_tokens ? cost.verify_seconds : cost.plain_verify_seconds).push_back(median(verify_samples[i]));
  for (auto& v : draft_samples) cost.draft_seconds.push_back(median(v));
  progress.finish();
  return cost;
}

std::vector<SpotCheckPoint> spot_check_step_cost(const StepCost& cost, model::Transformer& target,
                                                 draft::Drafter* drafter, const ProfileOptions& options) {
  // One request's points, measured as the profile measures them: a slot of cached context, a
  // warm-up pass, then kPasses passes over the points and the median of each.
  constexpr int kPasses = 3;
  ProfileOptions one = options;
  one.max_requests = 1;
  VerifyBench verify(target, one, drafter ? drafter->target_layer_ids() : std::vector<int64_t>{});
  std::optional<DraftBench> drafting;
  if (drafter) drafting.emplace(*drafter, one, verify);
  DraftBench* before = drafting ? &*drafting : nullptr;
  const int64_t block = options.gamma + 1;
  const VerifyBench::Point single = verify.point({1}), full_block = verify.point({block});
  struct Check {
    SpotCheckPoint point;
    std::function<std::vector<double>()> stretch;
    std::vector<double> samples;
  };
  std::vector<Check> checks;
  // Built member by member: GCC 12 misreads a braced temporary holding a string here as possibly
  // uninitialised (-Wmaybe-uninitialized), which CI's -Werror turns into a failed build.
  const auto add = [&checks](std::string label, double profiled_seconds, std::function<std::vector<double>()> stretch) {
    Check& c = checks.emplace_back();
    c.point.label = std::move(label);
    c.point.profiled_seconds = profiled_seconds;
    c.stretch = std::move(stretch);
  };
  add(drafter ? "verify(1)" : "plain(1)", drafter ? cost.verify_seconds.at(0) : cost.plain_cost(1),
      [&] { return verify_stretch(target, verify, before, single); });
  if (block > 1)
    add("verify(" + std::to_string(block) + ")", cost.verify_seconds.at(static_cast<size_t>(block - 1)),
        [&] { return verify_stretch(target, verify, before, full_block); });
  if (drafter) add("draft(1)", cost.draft_cost(1), [&] { return draft_stretch(target, verify, *drafting, 1, full_block); });
  for (int pass = 0; pass <= kPasses; ++pass)  // pass 0 warms up
    for (Check& c : checks) {
      const std::vector<double> times = c.stretch();
      if (pass > 0) c.samples.insert(c.samples.end(), times.begin(), times.end());
    }
  std::vector<SpotCheckPoint> points;
  for (Check& c : checks) {
    c.point.measured_seconds = median(c.samples);
    points.push_back(c.point);
  }
  return points;
}

std::optional<SpotCheckPoint> first_overstated_point(const std::vector<SpotCheckPoint>& points, double ratio) {
  for (const SpotCheckPoint& p : points)
    if (p.measured_seconds < ratio * p.profiled_seconds) return p;
  return std::nullopt;
}

int64_t typical_context(const std::vector<std::vector<int64_t>>& prompts, int64_t max_tokens) {
  if (prompts.empty()) return ProfileOptions{}.context;
  std::vector<int64_t> lengths;
  int64_t longest = 0;
  for (const auto& p : prompts) {
    lengths.push_back(static_cast<int64_t>(p.size()));
    longest = std::max(longest, lengths.back());
  }
  std::nth_element(lengths.begin(), lengths.begin() + static_cast<long>(lengths.size() / 2), lengths.end());
  const double typical = static_cast<double>(lengths[lengths.size() / 2] + max_tokens / 2);
  const auto nearest = static_cast<int64_t>(std::exp2(std::round(std::log2(std::max(typical, 1.0)))));
  return std::min(nearest, std::max<int64_t>(longest + max_tokens, ProfileOptions{}.context));
}

schedule::SpsMeta step_cost_meta(const std::string& model_dir, const model::Transformer& target,
                                 const std::string& drafter_dir, model::WeightDType drafter_dtype) {
  // The directory's name and weight bytes (a GGUF file's name and size), and a hash of its full
  // path: drafters of one shape in directories named alike (runs/a/model, runs/b/model) once
  // shared a profile, and with it another drafter's drafting costs.
  auto name = [](const std::string& dir) {
    if (dir.empty()) return std::string("none");
    const fs::path p = fs::weakly_canonical(dir);
    uintmax_t bytes = 0;
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".safetensors") bytes += e.file_size();
    } else {
      bytes = fs::file_size(p);
    }
    uint32_t hash = 2166136261u;  // FNV-1a
    for (const unsigned char c : p.string()) hash = (hash ^ c) * 16777619u;
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", hash);
    return p.filename().string() + "-" + std::to_string(bytes) + "-" + hex;
  };
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  // The executable's size and modification time: a rebuilt dspark (other kernels, another
  // engine) measures afresh instead of planning with its predecessor's costs.
  std::string build = "unknown";
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const uintmax_t size = fs::file_size(exe, error);
    const auto modified = fs::last_write_time(exe, error);
    if (!error) build = std::to_string(size) + "-" + std::to_string(modified.time_since_epoch().count());
  }
  // A bf16 KV cache reads half the bytes per step: its own profile.
  std::string dtype = model::weight_dtype_name(target.weight_dtype());
  if (target.kv_cache_dtype() != model::KvCacheDType::kF32)
    dtype += std::string("-kv") + model::kv_cache_dtype_name(target.kv_cache_dtype());
  std::string drafter = name(drafter_dir);
  if (drafter_dtype != model::WeightDType::kAuto) drafter += std::string("-") + model::weight_dtype_name(drafter_dtype);
  return {name(model_dir) + "+" + drafter, host, model::device_label(target.device()), dtype, date, build};
}

StepCost cached_step_cost(const fs::path& cache_dir, model::Transformer& target, draft::Drafter* drafter,
                          const ProfileOptions& options, const schedule::SpsMeta& meta) {
  // One file per context and gamma measured at: a step's cost grows with the positions it attends
  // to, and the drafting calls of another gamma draft another block length (one file for both
  // made runs alternating gammas measure afresh every time).
  std::string name = schedule::cache_file_name(meta);
  name.insert(name.size() - std::string(".json").size(),
              "--ctx" + std::to_string(options.context) + "--g" + std::to_string(options.gamma));
  const fs::path file = cache_dir / name;
  if (fs::exists(file)) {
    StepCost cost = StepCost::load(file);
    const bool covers = static_cast<int64_t>(cost.verify_seconds.size()) >= options.max_requests * (options.gamma + 1) &&
                        (drafter == nullptr || static_cast<int64_t>(cost.draft_seconds.size()) >= options.max_requests) &&
                        cost.context == options.context && cost.gamma == options.gamma;
    if (cost.meta.same_setup(meta) && covers) {
      const std::optional<SpotCheckPoint> off =
          first_overstated_point(spot_check_step_cost(cost, target, drafter, options), kOverstatedRatio);
      if (!off) return cost;
      std::fprintf(stderr,
                   "step-cost profile %s was measured on a busier machine (%s: %.2f ms now, %.2f ms in the profile): "
                   "measuring it again\n",
                   file.c_str(), off->label.c_str(), 1e3 * off->measured_seconds, 1e3 * off->profiled_seconds);
    }
  }
  StepCost cost = profile_step_cost(target, drafter, options, meta);
  cost.save(file);
  std::fprintf(stderr, "step-cost profile saved to %s\n", file.c_str());
  return cost;
}

fs::path default_cache_dir() {
  if (const char* d = std::getenv("DSPARK_CACHE"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "dspark";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "dspark";
  return fs::temp_directory_path() / "dspark-cache";
}

}  // namespace dspark::engine
