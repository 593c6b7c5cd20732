// Speculative generation of single requests through the engine (a batch of one, the `fixed`
// schedule): greedy equality with autoregressive decoding for every drafter, and losslessness at
// T > 0 by Monte Carlo through the real code path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "common/error.h"
#include "draft/draft_init.h"
#include "draft/load_drafter.h"
#include "engine/generate.h"
#include "model/linear.h"
#include "model/model_init.h"
#include "monte_carlo.h"
#include "stat_test.h"
#include "test_util.h"

namespace dspark {
namespace {

// A drafter of `method` for `target`, written to `dir` with random weights, loaded with its
// matrices in `dtype` (kAuto: as written, bf16).
std::unique_ptr<draft::Drafter> random_drafter(const model::Transformer& target, const std::string& method,
                                               const test::TempDir& dir, uint64_t seed,
                                               draft::MarkovHead head = draft::MarkovHead::kVanilla,
                                               model::WeightDType dtype = model::WeightDType::kAuto) {
  if (method == "ngram") return draft::load_drafter("ngram", "", target, {.max_slots = 1, .capacity = 256});
  draft::DrafterInitOptions options;
  options.method = draft::parse_method(method);
  options.block_size = 4;
  options.markov_head = head;
  const std::string out = (dir / (method + std::to_string(seed))).string();
  draft::write_random_drafter(target, draft::make_draft_config(target.config(), options), out, seed);
  return draft::load_drafter(method, out, target, {.max_slots = 1, .capacity = 256, .weight_dtype = dtype});
}

// ---------------------------------------------------------------------------------------------
// Greedy: speculative output equals autoregressive output token for token.

struct GreedyCase {
  std::string target, method;
  draft::MarkovHead head = draft::MarkovHead::kVanilla;
  model::Kernels kernels = model::Kernels::kAuto;  // kTensorOps: the target on the path CUDA runs
  model::WeightDType dtype = model::WeightDType::kF32;  // target's and drafter's matrices (f16: converted)
  model::KvCacheDType kv = model::KvCacheDType::kF32;    // the target's cache
  std::optional<model::WeightDType> draft_dtype;         // the drafter's matrices, when not `dtype`
};

class GreedyEquality : public ::testing::TestWithParam<GreedyCase> {};

TEST_P(GreedyEquality, SpeculativeEqualsAutoregressive) {
  torch::NoGradGuard no_grad;
  const GreedyCase& c = GetParam();
  model::Transformer target = model::Transformer::load(test::fixture(c.target).string(),
                                                      {.weight_dtype = c.dtype, .kv_cache_dtype = c.kv, .kernels = c.kernels});
  test::TempDir dir;
  auto drafter = random_drafter(target, c.method, dir, 3, c.head, c.draft_dtype.value_or(c.dtype));
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {100, 17, 250, 9, 31, 77, 4}, {5, 5, 5, 5, 6, 5, 5, 5, 5}};
  for (const auto& prompt : prompts) {
    const std::vector<int64_t> ar = test::greedy(target, prompt, 40);
    for (int64_t gamma : {1, 3, 4}) {
      const engine::RequestOutcome spec = test::generate(target, drafter.get(), prompt, {.temperature = 0}, 40, {.gamma = gamma});
      EXPECT_EQ(spec.ids, ar) << c.method << " gamma " << gamma;
      EXPECT_EQ(spec.ids.size(), 40u);
      EXPECT_GT(spec.stats.num_drafts, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Drafters, GreedyEquality,
    ::testing::Values(GreedyCase{"tiny-qwen3-tied", "dspark"}, GreedyCase{"tiny-qwen3-tied", "dflash"},
                      GreedyCase{"tiny-qwen3-tied", "eagle3"}, GreedyCase{"tiny-qwen3-tied", "ngram"},
                      GreedyCase{"tiny-qwen3-untied", "dspark"}, GreedyCase{"tiny-qwen3-untied", "eagle3"},
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kRnn},
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kTensorOps},
                      GreedyCase{"tiny-qwen3-untied", "eagle3", draft::MarkovHead::kVanilla, model::Kernels::kTensorOps},
                      GreedyCase{"tiny-qwen3-tied", "ngram", draft::MarkovHead::kVanilla, model::Kernels::kTensorOps},
                      // f16 target and drafter matrices: the f16 kernels, the Markov head's f16 W2,
                      // the drafter's bf16 copies of an f16 target's embedding and head
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF16},
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kRnn, model::Kernels::kAuto,
                                 model::WeightDType::kF16},
                      GreedyCase{"tiny-qwen3-tied", "dflash", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF16},
                      GreedyCase{"tiny-qwen3-untied", "eagle3", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF16},
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kTensorOps,
                                 model::WeightDType::kF16},
                      // quantized targets and drafters (a drafter's matrices whose rows are not
                      // whole blocks of 32, the Markov head's W2 at these ranks, stay in bf16)
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kQ8_0},
                      GreedyCase{"tiny-qwen3-tied", "eagle3", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kQ8_0},
                      GreedyCase{"tiny-qwen3-tied", "dspark", draft::MarkovHead::kRnn, model::Kernels::kAuto,
                                 model::WeightDType::kQ4_0},
                      // quantized drafters of an f32 target: the drafter's numerics shape only its
                      // proposals, so the output is the target's whatever they are
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF32, model::KvCacheDType::kF32, model::WeightDType::kQ8_0},
                      GreedyCase{"tiny-qwen3-tied", "dflash", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF32, model::KvCacheDType::kF32, model::WeightDType::kQ4_0},
                      GreedyCase{"tiny-qwen3-untied", "eagle3", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF32, model::KvCacheDType::kF32, model::WeightDType::kQ8_0},
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kTensorOps,
                                 model::WeightDType::kF32, model::KvCacheDType::kF32, model::WeightDType::kQ8_0},
                      // a bf16 KV cache (head_dim 32: the vdpbf16ps attention where the CPU has it)
                      GreedyCase{"tiny-qwen3-untied", "dspark", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kF32, model::KvCacheDType::kBF16},
                      GreedyCase{"tiny-qwen3-tied", "eagle3", draft::MarkovHead::kVanilla, model::Kernels::kAuto,
                                 model::WeightDType::kQ8_0, model::KvCacheDType::kBF16},
                      GreedyCase{"tiny-qwen3-untied", "dflash", draft::MarkovHead::kVanilla, model::Kernels::kTensorOps,
                                 model::WeightDType::kF32, model::KvCacheDType::kBF16}),
    [](const auto& info) {
      return info.param.target.substr(11) + "_" + info.param.method +
             (info.param.head == draft::MarkovHead::kRnn ? "_rnn" : "") +
             (info.param.kernels == model::Kernels::kTensorOps ? "_tensor_ops" : "") +
             (info.param.dtype == model::WeightDType::kF32 ? std::string()
                                                            : "_" + std::string(model::weight_dtype_name(info.param.dtype))) +
             (info.param.kv == model::KvCacheDType::kF32 ? "" : "_kv_bf16") +
             (info.param.draft_dtype ? "_draft_" + std::string(model::weight_dtype_name(*info.param.draft_dtype)) : "");
    });

// A drafter written for a bf16 target serves that target converted to f16 on load (--dtype f16):
// its stored embedding / head are the bf16 originals the target's f16 tensors were rounded from.
// A block wider than the CPU rows kernels take (65 > kSmallBatchRows slots) drafts through libtorch
// instead of tripping the kernels' row limit; its drafts are verified as any others.
TEST(Speculative, ABlockWiderThanTheRowKernelsDrafts) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(test::fixture("tiny-qwen3-tied").string(), {model::WeightDType::kF32});
  test::TempDir dir;
  draft::DrafterInitOptions options;
  options.method = draft::DraftMethod::kDSpark;
  options.block_size = model::kSmallBatchRows + 1;
  draft::write_random_drafter(target, draft::make_draft_config(target.config(), options), dir.file("wide"), 4);
  auto drafter = draft::load_drafter("dspark", dir.file("wide"), target, {.max_slots = 1, .capacity = 256});
  const std::vector<int64_t> prompt = {1, 2, 3};
  const engine::RequestOutcome spec = test::generate(target, drafter.get(), prompt, {.temperature = 0}, 24, {.gamma = 4});
  EXPECT_EQ(spec.ids, test::greedy(target, prompt, 24));
  EXPECT_GT(spec.stats.num_drafts, 0);
}

TEST(Speculative, DrafterOfABf16TargetServesItConvertedToF16) {
  torch::NoGradGuard no_grad;
  const std::string fixture = test::fixture("tiny-qwen3-tied").string();  // bf16
  const model::Transformer bf16_target = model::Transformer::load(fixture);
  ASSERT_EQ(bf16_target.weight_dtype(), model::WeightDType::kBF16);
  test::TempDir dir;
  draft::DrafterInitOptions options;
  options.block_size = 4;
  draft::write_random_drafter(bf16_target, draft::make_draft_config(bf16_target.config(), options),
                              (dir / "dspark").string(), 9);
  model::Transformer target = model::Transformer::load(fixture, {.weight_dtype = model::WeightDType::kF16});
  // The conversion lost bits (values below f16's normal range), so the target's rounded back to
  // bf16 is not the drafter's copy: only "the copy rounded to f16 is the target's" accepts it.
  ASSERT_FALSE(torch::equal(target.embedding().to(torch::kBFloat16), bf16_target.embedding()));
  auto drafter = draft::load_drafter("dspark", (dir / "dspark").string(), target, {.max_slots = 1, .capacity = 256});
  const std::vector<int64_t> prompt = {100, 17, 250, 9, 31, 77, 4};
  const engine::RequestOutcome spec = test::generate(target, drafter.get(), prompt, {.temperature = 0}, 40, {.gamma = 3});
  EXPECT_EQ(spec.ids, test::greedy(target, prompt, 40));
  EXPECT_GT(spec.stats.num_drafts, 0);
}

// A drafter written for a bf16 target serves that target quantized on load (--dtype q8_0 / q4_0):
// its stored embedding / head are the values the target's blocks were quantized from. A drafter of
// another target is still refused.
TEST(Speculative, DrafterOfABf16TargetServesItQuantized) {
  torch::NoGradGuard no_grad;
  const std::string fixture = test::fixture("tiny-qwen3-tied").string();  // bf16
  const model::Transformer bf16_target = model::Transformer::load(fixture);
  test::TempDir dir;
  draft::DrafterInitOptions options;
  options.block_size = 4;
  draft::write_random_drafter(bf16_target, draft::make_draft_config(bf16_target.config(), options),
                              (dir / "dspark").string(), 9);
  const model::Transformer other = model::Transformer::load(test::fixture("tiny-qwen3-untied").string());
  for (model::WeightDType dtype : {model::WeightDType::kQ8_0, model::WeightDType::kQ4_0}) {
    SCOPED_TRACE(model::weight_dtype_name(dtype));
    model::Transformer target = model::Transformer::load(fixture, {.weight_dtype = dtype});
    auto drafter = draft::load_drafter("dspark", (dir / "dspark").string(), target, {.max_slots = 1, .capacity = 256,
                                                                                     .weight_dtype = dtype});
    const std::vector<int64_t> prompt = {100, 17, 250, 9, 31, 77, 4};
    const engine::RequestOutcome spec = test::generate(target, drafter.get(), prompt, {.temperature = 0}, 40, {.gamma = 3});
    EXPECT_EQ(spec.ids, test::greedy(target, prompt, 40));
    EXPECT_GT(spec.stats.num_drafts, 0);
  }
  if (other.config().vocab_size == bf16_target.config().vocab_size &&
      other.config().hidden_size == bf16_target.config().hidden_size) {
    model::Transformer other_q8 = model::Transformer::load(test::fixture("tiny-qwen3-untied").string(),
                                                           {.weight_dtype = model::WeightDType::kQ8_0});
    EXPECT_THROW(draft::load_drafter("dspark", (dir / "dspark").string(), other_q8, {.max_slots = 1, .capacity = 256}),
                 Error);
  }
}

TEST(Speculative, StopTokenEndsGenerationAndIsNotEmitted) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(test::fixture("tiny-qwen3-tied").string(), {model::WeightDType::kF32});
  test::TempDir dir;
  auto drafter = random_drafter(target, "dspark", dir, 1);
  const std::vector<int64_t> prompt = {1, 2, 3};
  const std::vector<int64_t> free_run = test::greedy(target, prompt, 40);
  const std::vector<int64_t> stop = {free_run[10]};  // stop at the 11th token's first occurrence
  const std::vector<int64_t> ar = test::greedy(target, prompt, 40, stop);
  const engine::RequestOutcome spec = test::generate(target, drafter.get(), prompt, {.temperature = 0}, 40, {.gamma = 4}, stop);
  EXPECT_EQ(spec.ids, ar);
  EXPECT_EQ(spec.finish_reason, "stop");
  EXPECT_LE(spec.ids.size(), 10u);
}

// ---------------------------------------------------------------------------------------------
// Losslessness by Monte Carlo: the first three generated tokens of N independent speculative
// samples against the exact autoregressive distribution computed from the target.
//
// Protocol: tests/engine/monte_carlo.h. Drafters: random DSpark (with and without a confidence
// threshold), DFlash and EAGLE-3, block 4, gamma 3. Every case must pass, and a verifier
// accepting with min(1, q/p) must fail.

struct McResult {
  std::vector<test::ChiSquare> tests;  // token 1, token 2, token 3, joint 1-2
  engine::RequestStats stats;          // pooled over the samples (shows drafts were accepted)
  double min_p() const {
    double m = 1;
    for (const auto& t : tests) m = std::min(m, t.p_value);
    return m;
  }
};

// n_samples requests, one at a time through one engine (the `fixed` schedule, gamma 3), each on
// its own seed.
McResult run_monte_carlo(model::Transformer& target, draft::Drafter& drafter, const std::vector<int64_t>& prompt,
                         const sampling::SamplingParams& params, double confidence_threshold,
                         const sampling::SampledVerifier& verifier, int64_t n_samples) {
  engine::Engine engine(target, &drafter,
                        {.max_concurrency = 1, .max_context = static_cast<int64_t>(prompt.size()) + 3, .gamma = 3,
                         .schedule = schedule::ScheduleKind::kFixed, .verifier = verifier});
  for (int64_t s = 0; s < n_samples; ++s) {
    engine::EngineRequest request{prompt, params, 3};
    request.sampling.seed = 1000003 * 7 + static_cast<uint64_t>(s);
    request.confidence_threshold = confidence_threshold;
    engine.submit(std::move(request));
  }
  std::vector<std::vector<int64_t>> samples;
  engine::RequestStats stats;
  for (engine::RequestOutcome& outcome : engine.run()) {
    stats.merge(outcome.stats);
    samples.push_back(std::move(outcome.ids));
  }
  return {test::first_three_tokens_tests(test::exact_autoregressive(target, prompt, params), samples), stats};
}

struct McCase {
  std::string name, method;
  double temperature, top_p, threshold;
};

class MonteCarloLossless : public ::testing::TestWithParam<McCase> {};

TEST_P(MonteCarloLossless, FirstThreeTokensFollowTheTarget) {
  torch::NoGradGuard no_grad;
  const McCase& c = GetParam();
  test::TempDir dir;
  model::Transformer target = test::make_mc_target(dir);
  auto drafter = random_drafter(target, c.method, dir, 21);
  const sampling::SamplingParams params{.temperature = c.temperature, .top_p = c.top_p};
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 2, 6};
  const int64_t n = test::mc_samples();
  const McResult r = run_monte_carlo(target, *drafter, prompt, params, c.threshold, {}, n);
  for (size_t t = 0; t < r.tests.size(); ++t)
    std::printf("[mc] %s test %zu: N=%lld chi2=%.1f dof=%lld p=%.3g (threshold %.2g)\n", c.name.c_str(), t,
                static_cast<long long>(n), r.tests[t].statistic, static_cast<long long>(r.tests[t].dof),
                r.tests[t].p_value, test::kAlpha);
  std::printf("[mc] %s: %lld steps, %.3f drafts accepted per proposed\n", c.name.c_str(),
              static_cast<long long>(r.stats.num_steps), r.stats.acceptance_rate());
  EXPECT_GT(r.stats.num_accepted_tokens, 0);  // some drafts were accepted: the accept path ran
  EXPECT_GE(r.min_p(), test::kAlpha);
}

INSTANTIATE_TEST_SUITE_P(Drafters, MonteCarloLossless,
                         ::testing::Values(McCase{"dspark_T1", "dspark", 1.0, 1.0, 0.0},
                                           McCase{"dspark_T07_topp09", "dspark", 0.7, 0.9, 0.0},
                                           McCase{"dspark_T1_threshold", "dspark", 1.0, 1.0, 0.5},
                                           McCase{"dflash_T07_topp09", "dflash", 0.7, 0.9, 0.0},
                                           McCase{"eagle3_T1", "eagle3", 1.0, 1.0, 0.0}),
                         [](const auto& info) { return info.param.name; });

TEST(MonteCarloLossless, BrokenVerifierIsCaught) {
  // Control: the same test with the acceptance ratio inverted (q/p instead of p/q) must reject.
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  model::Transformer target = test::make_mc_target(dir);
  auto drafter = random_drafter(target, "dspark", dir, 21);
  const sampling::SampledVerifier broken = [](std::span<const float> p, std::span<const float> q, std::span<const int64_t> tokens,
                        int64_t vocab, sampling::Rng& rng) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int64_t k = 0; k < n; ++k) {
      const double pk = p[k * vocab + tokens[k]], qk = q[k * vocab + tokens[k]];
      if (!(rng.uniform() * pk < qk)) {  // broken: min(1, q/p)
        std::vector<float> residual(vocab);
        for (int64_t v = 0; v < vocab; ++v) residual[v] = std::max(0.0f, p[k * vocab + v] - q[k * vocab + v]);
        float total = 0;
        for (float r : residual) total += r;
        for (float& r : residual) r /= total;
        return sampling::VerifyOutcome{k, sampling::sample_from_probs(residual.data(), vocab, rng)};
      }
    }
    return sampling::VerifyOutcome{n, sampling::sample_from_probs(p.data() + n * vocab, vocab, rng)};
  };
  const McResult r = run_monte_carlo(target, *drafter, {3, 14, 15, 9, 2, 6}, {.temperature = 1.0}, 0.0, broken, test::mc_samples());
  std::printf("[mc] broken verifier: min p = %.3g (threshold %.2g)\n", r.min_p(), test::kAlpha);
  EXPECT_LT(r.min_p(), test::kAlpha);
}

}  // namespace
}  // namespace dspark
