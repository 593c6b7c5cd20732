// The engine with many requests in flight: greedy outputs at concurrency 1, 8 and 32 equal single-request
// autoregressive outputs under every schedule; requests joining, leaving and being cancelled
// mid-flight never disturb another's output; no request starves; stop strings and streaming
// cancellation; and Monte Carlo losslessness at concurrency 8 under dspark-sync and dspark-async.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/json_file.h"
#include "draft/draft_init.h"
#include "draft/load_drafter.h"
#include "engine/generate.h"
#include "engine/engine.h"
#include "monte_carlo.h"
#include "sampling/rejection.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
using schedule::ScheduleKind;
const fs::path kModel = fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l";
const fs::path kDSpark = fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l-dspark";

// A jagged step cost (a cliff every 8 tokens) so the schedulers pick varied lengths: verify(B)
// grows by per_token with B and jumps by `cliff` past every multiple of 8; drafting costs a
// fixed share.
engine::StepCost synthetic_cost(int64_t max_requests, int64_t gamma, double per_token = 0.04, double cliff = 0.3,
                                double draft = 0.5) {
  engine::StepCost cost;
  for (int64_t B = 1; B <= max_requests * (gamma + 1); ++B)
    cost.verify_seconds.push_back(1.0 + per_token * B + (B % 8 == 1 && B > 1 ? cliff : 0.0));
  cost.draft_seconds.assign(max_requests, draft);
  cost.gamma = gamma;
  return cost;
}

std::vector<std::vector<int64_t>> chat_prompts(int n) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kModel);
  const tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::load(kModel);
  const std::vector<std::string> topics = {"the sea", "prime numbers", "a sorting function in Python", "bread",
                                           "the moon", "a list of fruits", "how to add fractions", "trains"};
  std::vector<std::vector<int64_t>> prompts;
  for (int i = 0; i < n; ++i) {
    const std::string text = (i % 2 ? "Tell me about " : "Write a short note on ") + topics[i % topics.size()] +
                             std::string(i / 8, '!');
    const std::vector<int32_t> ids = tok.encode(chat.render({{"user", text}}, {.add_generation_prompt = true, .enable_thinking = false}));
    prompts.emplace_back(ids.begin(), ids.end());
  }
  return prompts;
}

struct Fixture {
  model::Transformer target = model::Transformer::load(kModel.string(), {model::WeightDType::kF32});
  std::unique_ptr<draft::Drafter> drafter =
      draft::load_drafter("dspark", kDSpark.string(), target, {.max_slots = 32, .capacity = 512});
  // Verify steps of 1 + 0.01 B with a 0.3 cliff past every multiple of 8, drafting 0.1: drafting
  // pays at every concurrency up to 32 for this drafter.
  engine::StepCost cost = synthetic_cost(32, 7, 0.01, 0.3, 0.1);
  std::vector<std::vector<int64_t>> prompts = chat_prompts(32);
  std::vector<std::vector<int64_t>> expected;  // greedy autoregressive output per prompt

  explicit Fixture(int64_t max_tokens) {
    for (const auto& p : prompts)
      expected.push_back(test::greedy(target, p, max_tokens));
  }
  engine::Engine engine(int64_t concurrency, ScheduleKind kind) {
    return engine::Engine(target, drafter.get(), {.max_concurrency = concurrency, .max_context = 256,
                                                       .gamma = 7, .schedule = kind, .step_cost = &cost});
  }
};

TEST(Engine, GreedyEqualsAutoregressiveAtEveryConcurrencyAndSchedule) {
  torch::NoGradGuard no_grad;
  Fixture f(24);
  const std::vector<std::pair<int64_t, ScheduleKind>> runs = {
      {1, ScheduleKind::kDsparkAsync}, {8, ScheduleKind::kDsparkAsync}, {32, ScheduleKind::kDsparkAsync},
      {8, ScheduleKind::kDsparkSync},  {8, ScheduleKind::kFixed},       {8, ScheduleKind::kMtp1},
      {8, ScheduleKind::kThreshold},   {8, ScheduleKind::kNone}};
  for (const auto& [concurrency, kind] : runs) {
    SCOPED_TRACE(schedule::schedule_kind_name(kind) + " at concurrency " + std::to_string(concurrency));
    engine::Engine engine = f.engine(concurrency, kind);
    std::map<int64_t, size_t> prompt_of;
    for (size_t i = 0; i < f.prompts.size(); ++i) prompt_of[engine.submit({f.prompts[i], {.temperature = 0}, 24})] = i;
    const std::vector<engine::RequestOutcome> outcomes = engine.run();
    ASSERT_EQ(outcomes.size(), f.prompts.size());
    for (const auto& o : outcomes) EXPECT_EQ(o.ids, f.expected[prompt_of[o.id]]) << "prompt " << prompt_of[o.id];
    // Drafts were verified and accepted, except under dspark-sync at concurrency 8: the cliff at
    // B = 9 makes its early stop refuse the first draft (the jagged-curve failure the async
    // scheduler's unconstrained search exists for; it crosses the cliff at the same load).
    if (kind == ScheduleKind::kDsparkSync || kind == ScheduleKind::kNone) {
      EXPECT_EQ(engine.stats().verified_drafts, 0);
    } else {
      EXPECT_GT(engine.stats().acceptance_length(), 1.3);
    }
    if (kind == ScheduleKind::kMtp1) {
      EXPECT_LE(engine.stats().mean_budget(), 1.0);
    }
  }
}

// A block drafter writes its whole block, past the drafts a request still needs, so within a block
// of the end of the drafter's positions the engine decodes without drafts: the requests run to the
// last position (here a drafter copy placing 64; 7-slot blocks from position 58 on would not fit)
// instead of the step failing, and with it every request in flight.
TEST(Engine, RequestsRunToTheLastPositionTheDrafterCanPlace) {
  torch::NoGradGuard no_grad;
  const int64_t limit = 64;
  test::TempDir dir;
  fs::copy(kDSpark, dir / "drafter", fs::copy_options::recursive);
  nlohmann::json config = read_json_file(dir / "drafter/config.json");
  config["max_position_embeddings"] = limit;
  write_json_file(dir / "drafter/config.json", config);
  model::Transformer target = model::Transformer::load(kModel.string(), {model::WeightDType::kF32});
  const auto drafter = draft::load_drafter("dspark", dir.file("drafter"), target, {.max_slots = 2, .capacity = 2 * limit});
  const std::vector<std::vector<int64_t>> prompts = chat_prompts(2);
  engine::Engine engine(target, drafter.get(),
                        {.max_concurrency = 2, .max_context = limit, .gamma = 7, .schedule = ScheduleKind::kFixed});
  std::map<int64_t, size_t> prompt_of;
  for (size_t i = 0; i < prompts.size(); ++i)
    prompt_of[engine.submit({prompts[i], {.temperature = 0}, limit - static_cast<int64_t>(prompts[i].size())})] = i;
  const std::vector<engine::RequestOutcome> outcomes = engine.run();
  ASSERT_EQ(outcomes.size(), prompts.size());
  for (const auto& o : outcomes) {
    const std::vector<int64_t>& prompt = prompts[prompt_of[o.id]];
    EXPECT_EQ(o.finish_reason, "length");
    EXPECT_EQ(o.ids, test::greedy(target, prompt, limit - static_cast<int64_t>(prompt.size())));
  }
  EXPECT_GT(engine.stats().verified_drafts, 0);
}

// With fail_requests_alone (serving), a request whose verification fails (here the verifier's
// first call raises, as sampling NaN logits does) finishes with "error" and the message, and the
// request beside it in the same steps runs on to the tokens it has alone; without it the step
// throws, as commands running their own requests want.
TEST(Engine, ARequestThatFailsAloneLeavesTheOthersRunning) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kModel.string(), {model::WeightDType::kF32});
  const auto drafter = draft::load_drafter("dspark", kDSpark.string(), target, {.max_slots = 2, .capacity = 256});
  const std::vector<std::vector<int64_t>> prompts = chat_prompts(2);
  auto run = [&](bool alone, int fail_call) {
    int calls = 0;
    const sampling::SampledVerifier verifier = [&](std::span<const float> p, std::span<const float> q,
                                                   std::span<const int64_t> drafts, int64_t vocab, sampling::Rng& rng) {
      if (++calls == fail_call) throw Error("sampling: the distribution has no finite mass (test)");
      return sampling::verify_sampled(p, q, drafts, vocab, rng);
    };
    engine::Engine engine(target, drafter.get(),
                          {.max_concurrency = 2, .max_context = 256, .gamma = 7, .schedule = ScheduleKind::kFixed,
                           .fail_requests_alone = alone, .verifier = verifier});
    for (const std::vector<int64_t>& prompt : prompts) engine.submit({prompt, {.temperature = 1.0, .seed = 5}, 24});
    return engine.run();
  };
  const std::vector<engine::RequestOutcome> clean = run(true, 0);
  const std::vector<engine::RequestOutcome> failed = run(true, 1);
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].finish_reason, "error");
  EXPECT_NE(failed[0].text.find("no finite mass"), std::string::npos) << failed[0].text;
  EXPECT_EQ(failed[1].finish_reason, clean[1].finish_reason);
  EXPECT_EQ(failed[1].ids, clean[1].ids);
  EXPECT_THROW(run(false, 1), Error);
}

// Where drafting costs far more than a verify step (here 50x), dspark-async keeps the drafter off,
// judging from the confidences of its last drafting steps, and drafts only on its periodic probes;
// the outputs stay the autoregressive ones.
TEST(Engine, AsyncSkipsTheDrafterWhenDraftingCostsMoreThanItSaves) {
  torch::NoGradGuard no_grad;
  Fixture f(24);
  f.cost = synthetic_cost(32, 7, 0.04, 0.3, 50.0);
  engine::Engine engine = f.engine(8, ScheduleKind::kDsparkAsync);
  std::map<int64_t, size_t> prompt_of;
  for (size_t i = 0; i < f.prompts.size(); ++i) prompt_of[engine.submit({f.prompts[i], {.temperature = 0}, 24})] = i;
  for (const auto& o : engine.run()) EXPECT_EQ(o.ids, f.expected[prompt_of[o.id]]);
  const engine::EngineStats& st = engine.stats();
  std::printf("[gate] %lld of %lld steps drafted\n", static_cast<long long>(st.drafting_steps), static_cast<long long>(st.steps));
  EXPECT_GT(st.drafting_steps, 0);
  EXPECT_LE(st.drafting_steps, st.steps / 8 + 3);  // the first two steps, then probes only
  // Every drafting call was a probe (the first two fill the history): none verified a draft.
  EXPECT_EQ(st.verified_drafts, 0);
}

// At T = 1 too, with the gate shut: a probe's drafts draw from a stream of their own, so every
// request emits exactly the tokens `none` samples with the same seed, and its random stream ends
// at the same draw.
TEST(Engine, AsyncWithTheGateShutSamplesExactlyWhatNoneDoes) {
  torch::NoGradGuard no_grad;
  Fixture f(24);
  f.cost = synthetic_cost(32, 7, 0.04, 0.3, 50.0);
  std::map<ScheduleKind, std::vector<engine::RequestOutcome>> outcomes;
  for (ScheduleKind kind : {ScheduleKind::kNone, ScheduleKind::kDsparkAsync}) {
    engine::Engine engine = f.engine(8, kind);
    for (size_t i = 0; i < f.prompts.size(); ++i) engine.submit({f.prompts[i], {.temperature = 1, .seed = 100 + i}, 24});
    outcomes[kind] = engine.run();
    if (kind == ScheduleKind::kDsparkAsync) {
      ASSERT_GT(engine.stats().drafting_steps, 0);  // it did probe
      ASSERT_EQ(engine.stats().verified_drafts, 0);
    }
  }
  const auto& none = outcomes[ScheduleKind::kNone];
  const auto& async = outcomes[ScheduleKind::kDsparkAsync];
  ASSERT_EQ(none.size(), async.size());
  for (size_t i = 0; i < none.size(); ++i) {
    EXPECT_EQ(async[i].ids, none[i].ids) << "request " << i;
    EXPECT_EQ(async[i].next_draw, none[i].next_draw) << "request " << i;
  }
}

// The same workload with drafting nearly free: after the two probes that fill the history the
// gate drafts and verifies on most steps.
TEST(Engine, AsyncDraftsWhenDraftingPays) {
  torch::NoGradGuard no_grad;
  Fixture f(24);
  engine::Engine engine = f.engine(8, ScheduleKind::kDsparkAsync);
  for (const auto& p : f.prompts) engine.submit({p, {.temperature = 0}, 24});
  engine.run();
  const engine::EngineStats& st = engine.stats();
  EXPECT_GT(st.drafting_steps, st.steps / 2);
  EXPECT_GT(st.mean_budget(), 1.0);
}

// Requests submitted while others run, a request cancelled mid-flight, one without speculation,
// and different lengths (so they leave at different steps): every other output is unchanged, and
// with 2 slots for 12 requests every request finishes (none starves), admitted in FIFO order.
TEST(Engine, JoiningLeavingAndCancellingDoNotDisturbOthers) {
  torch::NoGradGuard no_grad;
  Fixture f(24);
  for (int64_t concurrency : {2, 5}) {
    SCOPED_TRACE("concurrency " + std::to_string(concurrency));
    engine::Engine engine = f.engine(concurrency, ScheduleKind::kDsparkAsync);
    std::map<int64_t, size_t> prompt_of;
    std::map<int64_t, int64_t> max_of;
    auto submit = [&](size_t i, int64_t max_tokens, bool speculate) {
      engine::EngineRequest r{f.prompts[i], {.temperature = 0}, max_tokens};
      r.speculate = speculate;
      const int64_t id = engine.submit(std::move(r));
      prompt_of[id] = i;
      max_of[id] = max_tokens;
      return id;
    };
    for (size_t i = 0; i < 3; ++i) submit(i, 8 + 8 * i, i != 1);
    std::vector<engine::RequestOutcome> outcomes;
    int64_t to_cancel = -1;
    for (int step = 0; !engine.idle(); ++step) {
      if (step == 2) to_cancel = submit(3, 24, true);
      if (step == 3)
        for (size_t i = 4; i < 12; ++i) submit(i, 4 + 2 * (i - 4), true);
      if (step == 5) engine.cancel(to_cancel);
      for (auto& o : engine.step()) outcomes.push_back(std::move(o));
      ASSERT_LT(step, 1000);
    }
    ASSERT_EQ(outcomes.size(), 12u);
    for (const auto& o : outcomes) {
      const std::vector<int64_t>& full = f.expected[prompt_of[o.id]];
      if (o.id == to_cancel) {
        EXPECT_EQ(o.finish_reason, "cancelled");
        EXPECT_LT(o.ids.size(), 24u);
        EXPECT_TRUE(std::equal(o.ids.begin(), o.ids.end(), full.begin()));  // a prefix, then nothing
        continue;
      }
      const std::vector<int64_t> expected(full.begin(), full.begin() + max_of[o.id]);
      EXPECT_EQ(o.ids, expected) << "request " << o.id;
      EXPECT_EQ(o.finish_reason, "length");
    }
  }
}

TEST(Engine, StopStringsStreamingCancellationAndBadRequests) {
  torch::NoGradGuard no_grad;
  Fixture f(24);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kModel);
  auto detokenize = [&](const std::vector<int64_t>& ids) { return tok.decode(std::vector<int32_t>(ids.begin(), ids.end())); };
  const std::string full_text = detokenize(f.expected[0]);
  ASSERT_GT(full_text.size(), 12u);
  const std::string stop = full_text.substr(8, 3);
  engine::Engine engine(f.target, f.drafter.get(), {.max_concurrency = 4, .max_context = 256, .gamma = 7,
                                                         .schedule = ScheduleKind::kDsparkAsync, .step_cost = &f.cost,
                                                         .detokenize = detokenize});
  engine::EngineRequest stopped{f.prompts[0], {.temperature = 0}, 24};
  stopped.stop_strings = {stop};
  engine.submit(stopped);
  engine::EngineRequest streamed{f.prompts[1], {.temperature = 0}, 24};
  std::vector<int64_t> seen;
  streamed.on_token = [&](int64_t t) {
    seen.push_back(t);
    return seen.size() < 5;  // the consumer goes away after 5 tokens
  };
  engine.submit(streamed);
  EXPECT_THROW(engine.submit({{}, {.temperature = 0}, 4}), Error);                        // empty prompt
  EXPECT_THROW(engine.submit({{1, 999999}, {.temperature = 0}, 4}), Error);               // id out of range
  EXPECT_THROW(engine.submit({f.prompts[2], {.temperature = 0}, 100000}), Error);         // context limit
  EXPECT_THROW(engine.submit({f.prompts[2], {.temperature = 1, .top_p = 2.0}, 4}), Error);  // bad sampling
  EXPECT_THROW(engine.submit({f.prompts[2], {.temperature = -1}, 4}), Error);             // negative temperature
  std::vector<engine::RequestOutcome> outcomes = engine.run();
  ASSERT_EQ(outcomes.size(), 2u);
  for (const auto& o : outcomes) {
    if (o.id == 0) {
      EXPECT_EQ(o.finish_reason, "stop");
      EXPECT_EQ(o.text, full_text.substr(0, full_text.find(stop)));
    } else {
      EXPECT_EQ(o.finish_reason, "cancelled");
      EXPECT_EQ(seen.size(), 5u);
      EXPECT_EQ(o.ids, seen);
      EXPECT_EQ(seen, std::vector<int64_t>(f.expected[1].begin(), f.expected[1].begin() + 5));
    }
  }
}

// Monte Carlo losslessness of the whole batched engine (protocol: monte_carlo.h): N requests with
// the same prompt and distinct seeds run at concurrency 8, so every sample shares its steps with
// others at different points of their generation, and the schedule varies l_r with the batch.
class BatchedMonteCarloLossless : public ::testing::TestWithParam<ScheduleKind> {};

TEST_P(BatchedMonteCarloLossless, FirstThreeTokensFollowTheTarget) {
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  model::Transformer target = test::make_mc_target(dir);
  draft::DrafterInitOptions init{.method = draft::DraftMethod::kDSpark, .block_size = 4};
  draft::write_random_drafter(target, draft::make_draft_config(target.config(), init), (dir / "draft").string(), 21);
  auto drafter = draft::load_drafter("dspark", (dir / "draft").string(), target, {.max_slots = 8, .capacity = 64});
  // Cheap enough per token that the random drafter's first slots (c near 0.5) are verified and
  // its third slots mostly not.
  const engine::StepCost cost = synthetic_cost(8, 3, 0.03, 0.02, 0.1);
  engine::Engine engine(target, drafter.get(), {.max_concurrency = 8, .max_context = 32, .gamma = 3,
                                                     .schedule = GetParam(), .step_cost = &cost});
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 2, 6};
  const sampling::SamplingParams params{.temperature = 1.0};
  const int64_t n = test::mc_samples();
  for (int64_t s = 0; s < n; ++s) {
    engine::EngineRequest r{prompt, params, 3};
    r.sampling.seed = 1000003 * 11 + static_cast<uint64_t>(s);
    engine.submit(std::move(r));
  }
  std::vector<std::vector<int64_t>> samples;
  for (auto& o : engine.run()) samples.push_back(std::move(o.ids));
  const auto tests = test::first_three_tokens_tests(test::exact_autoregressive(target, prompt, params), samples);
  double min_p = 1;
  for (size_t t = 0; t < tests.size(); ++t) {
    std::printf("[mc] batched %s test %zu: N=%lld chi2=%.1f dof=%lld p=%.3g (threshold %.2g)\n",
                schedule::schedule_kind_name(GetParam()).c_str(), t, static_cast<long long>(n), tests[t].statistic,
                static_cast<long long>(tests[t].dof), tests[t].p_value, test::kAlpha);
    min_p = std::min(min_p, tests[t].p_value);
  }
  const engine::EngineStats& st = engine.stats();
  std::printf("[mc] batched: %.2f drafts verified and %.2f tokens committed per request-step\n", st.mean_budget(),
              st.acceptance_length());
  EXPECT_GT(st.acceptance_length(), 1.05);  // drafts were verified and accepted
  EXPECT_LT(st.mean_budget(), 2.99);        // and the schedule did not always verify everything
  EXPECT_GE(min_p, test::kAlpha);
}

INSTANTIATE_TEST_SUITE_P(Schedules, BatchedMonteCarloLossless,
                         ::testing::Values(ScheduleKind::kDsparkSync, ScheduleKind::kDsparkAsync),
                         [](const auto& info) { return schedule::schedule_kind_name(info.param) == "dspark-sync" ? std::string("sync") : std::string("async"); });

// Every step reports its shape (requests drafting, verify and prefill tokens), its measured time,
// and the time the profile predicts for that shape, draft(R) + verify(B), the cost model the
// dspark schedules plan with.
TEST(Engine, LastStepReportsItsTimeAndThePredictedTime) {
  torch::NoGradGuard no_grad;
  Fixture f(16);
  engine::Engine e = f.engine(4, ScheduleKind::kFixed);
  for (int i = 0; i < 4; ++i) e.submit({f.prompts[i], {.temperature = 0}, 16, {}});
  int64_t drafting_steps = 0, prefill_steps = 0;
  while (!e.idle()) {
    e.step();
    const engine::StepTiming& t = e.last_step();
    const int64_t tokens = t.verify_tokens + t.prefill_tokens;
    ASSERT_GT(tokens, 0);
    double expected = f.cost.verify_seconds[static_cast<size_t>(tokens - 1)];
    if (t.drafting_requests > 0) expected += f.cost.draft_seconds[static_cast<size_t>(t.drafting_requests - 1)];
    EXPECT_DOUBLE_EQ(t.predicted_seconds, expected);
    EXPECT_GT(t.seconds, 0);
    EXPECT_LE(t.draft_seconds, t.seconds);
    if (t.drafting_requests > 0) {
      ++drafting_steps;
      EXPECT_GT(t.verify_tokens, t.drafting_requests);  // fixed: every request verifies its drafts
    }
    prefill_steps += t.prefill_tokens > 0;
  }
  EXPECT_GT(drafting_steps, 0);
  EXPECT_GT(prefill_steps, 0);
}

}  // namespace
}  // namespace dspark
