#include "engine/step_cost.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>

#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"

namespace dspark::engine {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double StepCost::draft_cost(int64_t n_requests) const {
  return n_requests <= 0 || draft_seconds.empty()
             ? 0.0
             : draft_seconds[std::min<size_t>(static_cast<size_t>(n_requests), draft_seconds.size()) - 1];
}

double StepCost::step_seconds(int64_t n_requests, int64_t n_tokens) const {
  if (n_tokens < 1 || n_tokens > static_cast<int64_t>(verify_seconds.size())) return 0;
  return draft_cost(n_requests) + verify_seconds[static_cast<size_t>(n_tokens - 1)];
}

schedule::SpsTable StepCost::sps_for(int64_t n_requests) const {
  const double draft = draft_cost(n_requests);
  std::vector<double> sps(verify_seconds.size());
  for (size_t b = 0; b < sps.size(); ++b) sps[b] = 1.0 / (draft + verify_seconds[b]);
  return schedule::SpsTable(std::move(sps), meta);
}

json StepCost::to_json() const {
  return {{"format", "dspark-step-cost"}, {"version", 1},
          {"sps_meta", schedule::SpsTable({1.0}, meta).to_json()},
          {"context", context}, {"gamma", gamma},
          {"verify_seconds", verify_seconds}, {"draft_seconds", draft_seconds}};
}

StepCost StepCost::from_json(const json& j, const std::string& source) {
  try {
    if (j.at("format") != "dspark-step-cost") throw Error(source + ": not a dspark step-cost profile");
    StepCost c;
    c.meta = schedule::SpsTable::from_json(j.at("sps_meta"), source).meta();
    c.context = j.at("context").get<int64_t>();
    c.gamma = j.at("gamma").get<int64_t>();
    c.verify_seconds = j.at("verify_seconds").get<std::vector<double>>();
    c.draft_seconds = j.at("draft_seconds").get<std::vector<double>>();
    for (double s : c.verify_seconds)
      if (!(s > 0)) throw Error(source + ": verify_seconds must be > 0");
    for (double s : c.draft_seconds)
      if (!(s > 0)) throw Error(source + ": draft_seconds must be > 0");
    if (c.verify_seconds.empty()) throw Error(source + ": verify_seconds is empty");
    return c;
  } catch (const json::exception& e) {
    throw Error(source + ": " + e.what());
  }
}

StepCost StepCost::load(const fs::path& path) { return from_json(read_json_file(path), path.string()); }

void StepCost::save(const fs::path& path) const {
  fs::create_directories(path.parent_path());
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

// Request r's share of B tokens over R requests: as even as possible, at least one each.
std::vector<int64_t> split_tokens(int64_t n_tokens, int64_t n_requests) {
  std::vector<int64_t> n(n_requests, n_tokens / n_requests);
  for (int64_t r = 0; r < n_tokens % n_requests; ++r) ++n[r];
  return n;
}

}  // namespace

StepCost profile_step_cost(model::Transformer& target, draft::Drafter* drafter, const ProfileOptions& o,
                           const schedule::SpsMeta& meta) {
  if (o.max_requests < 1 || o.gamma < 0 || o.context < 1 || o.runs < 1)
    throw Error("profile: --max-requests, --context and --runs must be >= 1 and --gamma >= 0");
  const int64_t max_tokens = o.max_requests * (o.gamma + 1);
  const int64_t vocab = target.config().vocab_size;
  model::KvCache cache = target.make_cache(o.max_requests, o.context + o.gamma + 2);
  std::vector<int64_t> slots;
  std::vector<int64_t> context_ids(o.context);
  for (int64_t i = 0; i < o.context; ++i) context_ids[i] = (i * 7919 + 13) % vocab;
  const std::vector<int64_t>& layers = drafter ? drafter->target_layer_ids() : std::vector<int64_t>{};
  torch::Tensor context_features;
  for (int64_t r = 0; r < o.max_requests; ++r) {
    slots.push_back(*cache.allocate());
    const model::ForwardOutput out = target.forward(cache, {context_ids, {{slots.back(), o.context}}, {}, layers, false});
    if (r == 0) context_features = out.captured_features();
  }

  StepCost cost;
  cost.meta = meta;
  cost.context = o.context;
  cost.gamma = o.gamma;
  // o.runs passes over every B (and R), each point timed once per pass after one warm-up pass;
  // the median per point. Interleaving the repeats spreads a burst of machine noise over many
  // points' single samples instead of one point's every sample. Each timed call follows an
  // untimed one of the same size, as a serving step follows one of about its size: timed right
  // after the largest point, the smallest ones measured its cache and thread wake-up debris
  // (draft(1) 1.4 ms against 0.75 ms in steady state).
  const int64_t n_points = max_tokens + (drafter ? o.max_requests : 0);
  Progress progress("profile", (o.runs + 1) * n_points, "point");
  std::vector<model::ForwardBatch> batches(max_tokens);
  std::vector<std::vector<int64_t>> shares(max_tokens);
  for (int64_t B = 1; B <= max_tokens; ++B) {  // B tokens spread over as many requests as a step at gamma has
    const int64_t R = std::min(o.max_requests, (B + o.gamma) / (o.gamma + 1));  // ceil(B / (gamma + 1))
    shares[B - 1] = split_tokens(B, std::max<int64_t>(1, R));
    model::ForwardBatch& batch = batches[B - 1];
    for (size_t r = 0; r < shares[B - 1].size(); ++r) {
      batch.seqs.push_back({slots[r], shares[B - 1][r]});
      for (int64_t i = 0; i < shares[B - 1][r]; ++i) {
        batch.token_ids.push_back(context_ids[(r + i) % o.context]);
        batch.logit_rows.push_back(static_cast<int64_t>(batch.logit_rows.size()));
      }
    }
    batch.capture_layers = layers;
  }
  sampling::SamplingParams params{.temperature = 1.0};
  std::vector<sampling::Rng> rngs(o.max_requests);
  if (drafter)
    for (int64_t r = 0; r < o.max_requests; ++r) drafter->begin(r, context_ids, context_features);
  std::vector<std::vector<double>> verify_samples(max_tokens), draft_samples(drafter ? o.max_requests : 0);
  int64_t done = 0;
  for (int64_t pass = 0; pass <= o.runs; ++pass) {  // pass 0 warms up
    for (int64_t B = 1; B <= max_tokens; ++B) {
      auto verify = [&] {
        target.forward(cache, batches[B - 1]);
        for (size_t r = 0; r < shares[B - 1].size(); ++r) cache.truncate(slots[r], o.context);
      };
      verify();
      const double t = seconds_of(target.device(), verify);
      if (pass > 0) verify_samples[B - 1].push_back(t);
      progress.update(++done);
    }
    for (int64_t R = 1; drafter && R <= o.max_requests; ++R) {
      std::vector<draft::DraftRequest> requests;
      for (int64_t r = 0; r < R; ++r) requests.push_back({r, context_ids[r % o.context], o.gamma, 0.0, &params, &rngs[r]});
      auto draft = [&] { drafter->propose(requests); };
      draft();
      const double t = seconds_of(target.device(), draft);
      if (pass > 0) draft_samples[R - 1].push_back(t);
      progress.update(++done);
    }
  }
  if (drafter)
    for (int64_t r = 0; r < o.max_requests; ++r) drafter->end(r);
  for (auto& v : verify_samples) cost.verify_seconds.push_back(median(v));
  for (auto& v : draft_samples) cost.draft_seconds.push_back(median(v));
  progress.finish();
  return cost;
}

schedule::SpsMeta step_cost_meta(const std::string& model_dir, const model::Transformer& target,
                                 const std::string& drafter_dir) {
  auto name = [](const std::string& dir) {
    if (dir.empty()) return std::string("none");
    const fs::path p = fs::weakly_canonical(dir);
    uintmax_t bytes = 0;
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") bytes += e.file_size();
    return p.filename().string() + "-" + std::to_string(bytes);
  };
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {name(model_dir) + "+" + name(drafter_dir), host, model::device_label(target.device()),
          model::weight_dtype_name(target.weight_dtype()), date};
}

StepCost cached_step_cost(const fs::path& cache_dir, model::Transformer& target, draft::Drafter* drafter,
                          const ProfileOptions& options, const schedule::SpsMeta& meta) {
  const fs::path file = cache_dir / schedule::cache_file_name(meta);
  if (fs::exists(file)) {
    StepCost cost = StepCost::load(file);
    const bool covers = static_cast<int64_t>(cost.verify_seconds.size()) >= options.max_requests * (options.gamma + 1) &&
                        (drafter == nullptr || static_cast<int64_t>(cost.draft_seconds.size()) >= options.max_requests);
    if (cost.meta.same_setup(meta) && covers) return cost;
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
