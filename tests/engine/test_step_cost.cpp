// The step-cost model the dspark schedules plan with: the SPS tables it gives (drafting cost of
// the batch, the per-request cost the plain-step curve implies), its JSON round trip, a real
// profile of the tiny model and its drafter (every curve filled, the drafter's slots restarted
// before they outgrow its cache), what the cache key holds: the build, the model directories,
// the context and gamma, and the spot check that re-measures a cached profile taken under load.
#include <gtest/gtest.h>

#include "common/error.h"
#include "draft/load_drafter.h"
#include "engine/step_cost.h"
#include "test_util.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

TEST(StepCost, SpsTableAddsTheDraftingCostOfTheCurrentBatch) {
  engine::StepCost cost;
  cost.verify_seconds = {0.010, 0.011, 0.020};
  cost.draft_seconds = {0.005, 0.006};
  EXPECT_NEAR(cost.sps_for(0).sps(3), 1 / 0.020, 1e-9);
  EXPECT_NEAR(cost.sps_for(1).sps(2), 1 / 0.016, 1e-9);
  EXPECT_NEAR(cost.sps_for(2).sps(1), 1 / 0.016, 1e-9);
  test::TempDir dir;
  cost.meta = {"model", "host", "cpu", "f32", "2026-11-30T00:00:00Z", "build-1"};
  cost.plain_verify_seconds = {0.010, 0.015};
  cost.save(dir / "cost.json");
  const engine::StepCost back = engine::StepCost::load(dir / "cost.json");
  EXPECT_EQ(back.verify_seconds, cost.verify_seconds);
  EXPECT_EQ(back.plain_verify_seconds, cost.plain_verify_seconds);
  EXPECT_EQ(back.draft_seconds, cost.draft_seconds);
  EXPECT_TRUE(back.meta.same_setup(cost.meta));
  test::write_text(dir / "bad.json", R"({"format": "dspark-step-cost", "version": 1})");
  EXPECT_THROW(engine::StepCost::load(dir / "bad.json"), Error);
}

// gamma 3: verify(B) was measured over ceil(B / 4) requests. Four requests of one token cost
// 0.016 against verify(4)'s 0.010 over one request, so each request beyond the measured ones
// costs (0.016 - 0.010) / 3 = 0.002.
TEST(StepCost, RequestsBeyondTheMeasuredOnesCostWhatThePlainCurveShows) {
  engine::StepCost cost;
  cost.gamma = 3;
  cost.verify_seconds = {0.007, 0.008, 0.009, 0.010, 0.012, 0.013, 0.014, 0.015};
  cost.plain_verify_seconds = {0.007, 0.010, 0.013, 0.016};
  cost.draft_seconds = {0.001, 0.002, 0.003, 0.004};
  EXPECT_NEAR(cost.verify_cost(4, 1), 0.010, 1e-12);                // as measured
  EXPECT_NEAR(cost.verify_cost(4, 4), 0.016, 1e-12);                // the plain step itself
  EXPECT_NEAR(cost.verify_cost(8, 4), 0.015 + 2 * 0.002, 1e-12);    // 8 tokens were measured over 2 requests
  EXPECT_NEAR(cost.verify_cost(8, 2), 0.015, 1e-12);
  EXPECT_NEAR(cost.step_seconds(4, 8, 4), 0.004 + 0.019, 1e-12);
  EXPECT_EQ(cost.step_seconds(4, 9, 4), 0.0);                       // past the profile
  EXPECT_NEAR(cost.sps_for(0).sps(4), 1 / 0.016, 1e-9);             // no drafting: B requests of one token
  EXPECT_NEAR(cost.sps_for(0).sps(1), 1 / 0.007, 1e-9);
  EXPECT_NEAR(cost.sps_for(0).sps(6), 1 / (0.013 + 4 * 0.002), 1e-9);  // past the plain curve: 6 - 2 requests more
  EXPECT_NEAR(cost.step_seconds(0, 3, 3), 0.013, 1e-12);            // plain, as measured
  EXPECT_NEAR(cost.step_seconds(0, 4, 2), 0.010 + 0.002, 1e-12);      // no drafting call, but drafts verified
  EXPECT_NEAR(cost.sps_for(4).sps(5), 1 / (0.004 + 0.012 + 2 * 0.002), 1e-9);
  // Without the plain curve (a profile from before it) nothing is added.
  cost.plain_verify_seconds.clear();
  EXPECT_NEAR(cost.verify_cost(8, 4), 0.015, 1e-12);
}

TEST(StepCost, ProfileOfTheTinyModelFillsEveryCurve) {
  torch::NoGradGuard no_grad;
  const fs::path source(DSPARK_SOURCE_DIR);
  model::Transformer target = model::Transformer::load((source / "models/tiny-target-8l").string());
  auto drafter =
      draft::load_drafter("dspark", (source / "models/tiny-target-8l-dspark").string(), target, {.max_slots = 3, .capacity = 128});
  // Two passes over R = 1..3, two drafting calls per point, four tokens committed before each:
  // slot 0 grows by 48 positions, more than the 32 the profile lets a slot grow before it
  // restarts it, so the restart runs too (and the cache of 64 + 64 positions never overflows).
  const engine::ProfileOptions o{.max_requests = 3, .gamma = 7, .context = 64, .runs = 1, .committed = 4, .quiet = true};
  const engine::StepCost cost =
      engine::profile_step_cost(target, drafter.get(), o, engine::step_cost_meta((source / "models/tiny-target-8l").string(), target, ""));
  EXPECT_EQ(cost.verify_seconds.size(), 24u);
  EXPECT_EQ(cost.plain_verify_seconds.size(), 3u);
  EXPECT_EQ(cost.draft_seconds.size(), 3u);
  for (const auto* curve : {&cost.verify_seconds, &cost.plain_verify_seconds, &cost.draft_seconds})
    for (double s : *curve) EXPECT_GT(s, 0);
  EXPECT_EQ(cost.gamma, 7);
  EXPECT_EQ(cost.context, 64);
}

// Median prompt 100 tokens plus half of 128 new ones is 164: the nearest power of two is 128. A
// workload whose middle rounds up past its longest request is held to the room its drafter has.
TEST(StepCost, TypicalContextIsTheWorkloadsMiddleToAPowerOfTwo) {
  const std::vector<std::vector<int64_t>> prompts = {std::vector<int64_t>(90), std::vector<int64_t>(100),
                                                     std::vector<int64_t>(400)};
  EXPECT_EQ(engine::typical_context(prompts, 128), 128);
  EXPECT_EQ(engine::typical_context(prompts, 512), 256);                        // 100 + 256 = 356
  EXPECT_EQ(engine::typical_context({std::vector<int64_t>(3000)}, 128), 3128);  // 3064 -> 4096 > 3000 + 128
  EXPECT_EQ(engine::typical_context({std::vector<int64_t>(10)}, 0), 8);
  EXPECT_EQ(engine::typical_context({}, 128), engine::ProfileOptions{}.context);
}

// The cache keeps one profile per context and gamma: asking at another context or gamma measures
// afresh, and coming back to one finds it still there.
TEST(StepCost, CacheKeepsOneProfilePerContextAndGamma) {
  torch::NoGradGuard no_grad;
  const std::string dir = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
  model::Transformer target = model::Transformer::load(dir);
  const schedule::SpsMeta meta = engine::step_cost_meta(dir, target, "");
  test::TempDir cache;
  for (const auto& [context, gamma] : std::vector<std::pair<int64_t, int64_t>>{{32, 1}, {64, 1}, {32, 2}, {32, 1}}) {
    const engine::StepCost cost = engine::cached_step_cost(
        cache.path(), target, nullptr, {.max_requests = 1, .gamma = gamma, .context = context, .runs = 1}, meta);
    EXPECT_EQ(cost.context, context);
    EXPECT_EQ(cost.gamma, gamma);
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(cache.path())) {
    ++files;
    EXPECT_NE(entry.path().filename().string().find("--ctx"), std::string::npos);
  }
  EXPECT_EQ(files, 3);
}

// A GGUF target is a file, not a directory: its profile is named for the file and its size.
TEST(StepCost, MetaOfAGgufTargetNamesTheFile) {
  torch::NoGradGuard no_grad;
  const fs::path file = test::fixture("gguf-tiny/untied-q8_0.gguf");
  model::Transformer target = model::Transformer::load(file.string());
  const schedule::SpsMeta meta = engine::step_cost_meta(file.string(), target, "");
  EXPECT_EQ(meta.model_id.rfind("untied-q8_0.gguf-" + std::to_string(fs::file_size(file)) + "-", 0), 0u) << meta.model_id;
}

// A cached profile at another gamma is not reused: its drafting calls drafted another block.
TEST(StepCost, CacheMeasuresAfreshAtAnotherGamma) {
  torch::NoGradGuard no_grad;
  const std::string dir = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
  model::Transformer target = model::Transformer::load(dir);
  const schedule::SpsMeta meta = engine::step_cost_meta(dir, target, "");
  test::TempDir cache;
  for (int64_t gamma : {3, 1}) {  // gamma 3 covers gamma 1's points, yet is measured afresh
    const engine::StepCost cost =
        engine::cached_step_cost(cache.path(), target, nullptr, {.max_requests = 1, .gamma = gamma, .context = 32, .runs = 1}, meta);
    EXPECT_EQ(cost.gamma, gamma);
    EXPECT_EQ(static_cast<int64_t>(cost.verify_seconds.size()), gamma + 1);
  }
}

// Only a point the machine now runs well under its profiled time marks the profile as measured
// under load; points slower now are the present load, which the drift rescaling follows.
TEST(StepCost, OnlyAnOverstatedPointCondemnsAProfile) {
  const std::vector<engine::SpotCheckPoint> points = {
      {"verify(1)", 0.010, 0.020}, {"verify(8)", 0.020, 0.014}, {"draft(1)", 0.005, 0.001}};
  const std::optional<engine::SpotCheckPoint> off = engine::first_overstated_point(points, 0.75);
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(off->label, "verify(8)");  // 0.014 < 0.75 * 0.020, and it comes before draft(1)
  EXPECT_FALSE(engine::first_overstated_point({points[0]}, 0.75).has_value());
  EXPECT_FALSE(engine::first_overstated_point({{"verify(1)", 0.010, 0.0075}}, 0.75).has_value());  // at the bound
  EXPECT_FALSE(engine::first_overstated_point({}, 0.75).has_value());
}

// The spot check times one request's points with the drafter as the profile does.
TEST(StepCost, SpotCheckTimesOneRequestsPointsAgain) {
  torch::NoGradGuard no_grad;
  const fs::path source(DSPARK_SOURCE_DIR);
  model::Transformer target = model::Transformer::load((source / "models/tiny-target-8l").string());
  auto drafter =
      draft::load_drafter("dspark", (source / "models/tiny-target-8l-dspark").string(), target, {.max_slots = 2, .capacity = 128});
  engine::StepCost cost;
  cost.gamma = 3;
  cost.verify_seconds = {0.001, 0.002, 0.003, 0.004};
  cost.plain_verify_seconds = {0.0015};
  cost.draft_seconds = {0.0005};
  const std::vector<engine::SpotCheckPoint> points =
      engine::spot_check_step_cost(cost, target, drafter.get(), {.max_requests = 2, .gamma = 3, .context = 64});
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].label, "verify(1)");
  EXPECT_EQ(points[1].label, "verify(4)");
  EXPECT_EQ(points[2].label, "draft(1)");
  EXPECT_DOUBLE_EQ(points[0].profiled_seconds, 0.001);
  EXPECT_DOUBLE_EQ(points[1].profiled_seconds, 0.004);
  EXPECT_DOUBLE_EQ(points[2].profiled_seconds, 0.0005);
  for (const engine::SpotCheckPoint& p : points) EXPECT_GT(p.measured_seconds, 0) << p.label;
  // The drafter's slots are free again: a full profile can use every one.
  EXPECT_NO_THROW(engine::profile_step_cost(target, drafter.get(),
                                            {.max_requests = 2, .gamma = 3, .context = 64, .runs = 1, .quiet = true},
                                            engine::step_cost_meta((source / "models/tiny-target-8l").string(), target, "")));
}

// A cached profile whose every time is 20x what the machine measures (as if profiled beside a
// heavy job) is measured again and replaced; one that claims 20x less than the machine does is
// the present machine's load and is kept. The 20x factors leave room for any ctest neighbour.
TEST(StepCost, CacheMeasuresAgainAProfileTakenUnderLoad) {
  torch::NoGradGuard no_grad;
  const std::string dir = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
  model::Transformer target = model::Transformer::load(dir);
  const schedule::SpsMeta meta = engine::step_cost_meta(dir, target, "");
  const engine::ProfileOptions options{.max_requests = 1, .gamma = 1, .context = 32, .runs = 1, .quiet = true};
  test::TempDir cache;
  const engine::StepCost measured = engine::cached_step_cost(cache.path(), target, nullptr, options, meta);
  const fs::path file = fs::directory_iterator(cache.path())->path();
  auto scaled = [&](double factor) {
    engine::StepCost c = measured;
    for (auto* curve : {&c.verify_seconds, &c.plain_verify_seconds}) for (double& s : *curve) s *= factor;
    c.save(file);
    return c;
  };
  const engine::StepCost slow = scaled(20.0);
  const engine::StepCost again = engine::cached_step_cost(cache.path(), target, nullptr, options, meta);
  EXPECT_LT(again.verify_seconds[0], slow.verify_seconds[0] / 4);
  EXPECT_EQ(engine::StepCost::load(file).verify_seconds, again.verify_seconds);  // the new one is saved
  const engine::StepCost fast = scaled(1.0 / 20.0);
  EXPECT_EQ(engine::cached_step_cost(cache.path(), target, nullptr, options, meta).verify_seconds, fast.verify_seconds);
}

// Two checkpoints of one size in directories of one name (runs/a/model, runs/b/model) are two
// models to the cache; the same directory reached by another path is one.
TEST(StepCost, MetaTellsApartDirectoriesOfTheSameNameAndSize) {
  torch::NoGradGuard no_grad;
  const fs::path source = test::fixture("tiny-qwen3-tied");
  const model::Transformer target = model::Transformer::load(source.string());
  test::TempDir a, b;
  for (const test::TempDir* d : {&a, &b}) fs::copy(source, d->path() / "model", fs::copy_options::recursive);
  const schedule::SpsMeta meta_a = engine::step_cost_meta((a.path() / "model").string(), target, "");
  const schedule::SpsMeta meta_b = engine::step_cost_meta((b.path() / "model").string(), target, "");
  EXPECT_FALSE(meta_a.same_setup(meta_b));
  EXPECT_NE(schedule::cache_file_name(meta_a), schedule::cache_file_name(meta_b));
  const schedule::SpsMeta again = engine::step_cost_meta((a.path() / "model" / ".." / "model").string(), target, "");
  EXPECT_TRUE(meta_a.same_setup(again));
  EXPECT_EQ(meta_a.model_id.rfind("model-", 0), 0u);  // still readable: the directory's name first
}

// A bf16 KV cache reads half the bytes per step: its profile is its own, in a file of its own.
TEST(StepCost, MetaTellsTheKvCacheDtypesApart) {
  torch::NoGradGuard no_grad;
  const std::string dir = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
  const model::Transformer f32 = model::Transformer::load(dir);
  const model::Transformer bf16 = model::Transformer::load(dir, {.kv_cache_dtype = model::KvCacheDType::kBF16});
  const schedule::SpsMeta meta_f32 = engine::step_cost_meta(dir, f32, "");
  const schedule::SpsMeta meta_bf16 = engine::step_cost_meta(dir, bf16, "");
  EXPECT_FALSE(meta_f32.same_setup(meta_bf16));
  EXPECT_NE(schedule::cache_file_name(meta_f32), schedule::cache_file_name(meta_bf16));
  EXPECT_NE(meta_bf16.dtype.find("kvbf16"), std::string::npos);
}

// A profile belongs to the executable that measured it: a rebuilt dspark measures afresh.
TEST(StepCost, MetaNamesTheBuild) {
  torch::NoGradGuard no_grad;
  const std::string dir = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
  const model::Transformer target = model::Transformer::load(dir);
  const schedule::SpsMeta meta = engine::step_cost_meta(dir, target, "");
  EXPECT_NE(meta.build_id, "");
  EXPECT_NE(meta.build_id, "unknown");
  schedule::SpsMeta rebuilt = meta;
  rebuilt.build_id = "another";
  EXPECT_FALSE(meta.same_setup(rebuilt));
}

}  // namespace
}  // namespace dspark
