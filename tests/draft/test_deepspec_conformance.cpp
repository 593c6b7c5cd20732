// DSpark / DFlash against the deepspec-tiny fixture (shared/fixtures/deepspec-tiny/README.md): a
// float64 reference of DeepSpec's semantics for target features, single draft calls (h, U, Z,
// greedy chain, confidences) and whole greedy speculative runs. Tolerances are the fixture's:
// float32 engines land within ~6e-6 of it; we assert 1e-4 on features and h and 1e-3 on logits,
// and exact tokens (the fixture's smallest relevant margin is 0.016). These run the drafter with
// exact products (Bf16Math::kExact); the default, bf16 dot products, is bounded against the same
// reference below.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "draft/dspark_drafter.h"
#include "engine/generate.h"
#include "model/kernels/cpu_isa.h"
#include "model/model_init.h"
#include "test_util.h"

namespace dspark {
namespace {

using nlohmann::json;
const std::filesystem::path kFixture = test::fixture("deepspec-tiny");
const std::filesystem::path kTarget = test::fixture("tiny-qwen3-untied");

json read_json(const std::filesystem::path& path) { return json::parse(test::read_text(path)); }

float max_abs_diff(const torch::Tensor& a, const std::vector<float>& expected) {
  torch::Tensor e = torch::from_blob(const_cast<float*>(expected.data()), {static_cast<int64_t>(expected.size())}, torch::kFloat32);
  EXPECT_EQ(a.numel(), e.numel());
  return (a.reshape({-1}).to(torch::kFloat32) - e).abs().max().item<float>();
}

struct Fixture {
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
};

class DeepSpecConformance : public ::testing::TestWithParam<std::string> {};

const draft::DrafterLoadOptions kExactDrafting{.max_slots = 1, .capacity = 64, .bf16_math = kernels::Bf16Math::kExact};

// One greedy draft call of 5 after a case's prompt: the target's features and greedy anchor that
// fed it, the block and its trace.
struct DraftCall {
  torch::Tensor features;
  int64_t anchor = -1;
  draft::DraftBlock block;
  draft::BlockTrace trace;
};
DraftCall draft_case(Fixture& f, draft::DSparkDrafter& drafter, const std::vector<int64_t>& prompt) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  model::KvCache cache = f.target.make_cache(1, n + 8);
  const int64_t slot = *cache.allocate();
  model::ForwardOutput out = f.target.forward(cache, {prompt, {{slot, n}}, {n - 1}, drafter.target_layer_ids(), false});
  DraftCall call;
  call.features = torch::cat(out.layer_hidden, 1);
  torch::Tensor last = out.logits[0].contiguous();
  call.anchor = sampling::argmax(last.data_ptr<float>(), last.numel());
  drafter.set_tracing(true);
  drafter.begin(0, prompt, call.features);
  sampling::SamplingParams greedy{.temperature = 0};
  sampling::Rng rng(0);
  call.block = drafter.propose({{0, call.anchor, 5, 0.0, &greedy, &rng, true}})[0];
  call.trace = drafter.last_traces().at(0);
  drafter.end(0);
  return call;
}

TEST_P(DeepSpecConformance, DraftCallMatchesReference) {
  torch::NoGradGuard no_grad;
  const std::string method = GetParam();
  Fixture f;
  auto drafter = draft::DSparkDrafter::load((kFixture / method).string(), f.target, kExactDrafting);
  EXPECT_EQ(drafter->method(), method);
  for (int c = 0; c < 4; ++c) {
    SCOPED_TRACE(method + " case " + std::to_string(c));
    const std::string stem = "case" + std::to_string(c);
    const json expected = read_json(kFixture / "expected" / method / (stem + ".json"));
    const DraftCall call = draft_case(f, *drafter, expected["prompt_ids"].get<std::vector<int64_t>>());
    EXPECT_LT(max_abs_diff(call.features, test::read_f32(kFixture / "expected/target" / (stem + ".features.f32"))), 1e-4);
    ASSERT_EQ(call.anchor, expected["anchor"].get<int64_t>());
    const draft::DraftBlock& block = call.block;
    EXPECT_LT(max_abs_diff(call.trace.hidden, test::read_f32(kFixture / "expected" / method / (stem + ".h.f32"))), 1e-4);
    EXPECT_LT(max_abs_diff(call.trace.base_logits, test::read_f32(kFixture / "expected" / method / (stem + ".u.f32"))), 1e-3);
    EXPECT_LT(max_abs_diff(block.logits, test::read_f32(kFixture / "expected" / method / (stem + ".z.f32"))), 1e-3);
    EXPECT_EQ(block.tokens, expected["draft_tokens"].get<std::vector<int64_t>>());
    if (method == "dspark") {
      const std::vector<double> conf = expected["confidences"].get<std::vector<double>>();
      ASSERT_EQ(block.confidence.size(), conf.size());
      for (size_t k = 0; k < conf.size(); ++k) EXPECT_NEAR(block.confidence[k], conf[k], 1e-4) << "slot " << k;
    } else {
      EXPECT_TRUE(block.confidence.empty());
    }
  }
}

// --draft-dtype f32 is f32 throughout, the LM head included: with the default bf16 math (which
// applies to bf16 matrices only) the draft call meets the exact tolerances. The LM head once stayed
// DeepSpec's bf16 copy and took bf16 dot products, 0.005-0.019 off the reference's Z.
TEST_P(DeepSpecConformance, F32DrafterIsF32ThroughItsLmHead) {
  torch::NoGradGuard no_grad;
  const std::string method = GetParam();
  Fixture f;
  auto drafter = draft::DSparkDrafter::load((kFixture / method).string(), f.target,
                                            {.max_slots = 1, .capacity = 64, .weight_dtype = model::WeightDType::kF32});
  for (int c = 0; c < 4; ++c) {
    SCOPED_TRACE(method + " case " + std::to_string(c));
    const std::string stem = "case" + std::to_string(c);
    const json expected = read_json(kFixture / "expected" / method / (stem + ".json"));
    const DraftCall call = draft_case(f, *drafter, expected["prompt_ids"].get<std::vector<int64_t>>());
    EXPECT_LT(max_abs_diff(call.block.logits, test::read_f32(kFixture / "expected" / method / (stem + ".z.f32"))), 1e-3);
  }
}

TEST_P(DeepSpecConformance, GreedySpeculativeRunMatchesReference) {
  torch::NoGradGuard no_grad;
  const std::string method = GetParam();
  Fixture f;
  auto drafter = draft::DSparkDrafter::load((kFixture / method).string(), f.target, kExactDrafting);
  for (int c = 0; c < 2; ++c) {
    SCOPED_TRACE(method + " run " + std::to_string(c));
    const json expected = read_json(kFixture / "expected" / method / ("specdec_case" + std::to_string(c) + ".json"));
    const std::vector<int64_t> prompt = expected["prompt_ids"].get<std::vector<int64_t>>();
    const int64_t max_tokens = expected["max_new_tokens"].get<int64_t>();
    const engine::RequestOutcome r = test::generate(f.target, drafter.get(), prompt, {.temperature = 0}, max_tokens,
                                                    {.gamma = 5, .record_rounds = true}, {458, 456});
    EXPECT_EQ(r.ids, expected["generated_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(r.ids, expected["target_greedy_ids"].get<std::vector<int64_t>>());
    // Every round's accepted count. DeepSpec runs one more round when the last kept token is an
    // anchor (all it commits is dropped); we stop there. Our last round may also propose fewer
    // drafts (we never verify past max_tokens), so its count is compared as a lower bound.
    const json& all_rounds = expected["rounds"];
    const int64_t last_position = static_cast<int64_t>(prompt.size()) + max_tokens - 1;
    std::vector<json> rounds;
    for (const json& round : all_rounds)
      if (round["start"].get<int64_t>() < last_position) rounds.push_back(round);
    ASSERT_EQ(r.stats.num_steps, static_cast<int64_t>(rounds.size()));
    ASSERT_EQ(r.rounds.size(), rounds.size());
    for (size_t i = 0; i + 1 < rounds.size(); ++i)
      EXPECT_EQ(r.rounds[i].accepted, rounds[i]["accepted"].get<int64_t>()) << "round " << i;
    EXPECT_LE(r.rounds.back().accepted, rounds.back()["accepted"].get<int64_t>());
  }
}

// The default drafting numerics, bf16 dot products (activations rounded to bf16 per matmul), stay
// near the float64 reference over the 4 cases (measured on an AVX512-BF16 CPU: h within 9.1e-3,
// logits within 3.8e-2 of it, where exact products are within 1e-4 and 1e-3; bounds about 3x the
// measured) and draft the reference's greedy tokens; and they are
// really on where the CPU has the instruction (the exact run's logits differ). Speculative output
// is the target's whatever the drafter's numerics (GreedyEquality, MonteCarloLossless).
TEST_P(DeepSpecConformance, DefaultBf16DotProductsDraftNearTheReference) {
  torch::NoGradGuard no_grad;
  const std::string method = GetParam();
  Fixture f;
  auto fast = draft::DSparkDrafter::load((kFixture / method).string(), f.target, {.max_slots = 1, .capacity = 64});
  auto exact = draft::DSparkDrafter::load((kFixture / method).string(), f.target, kExactDrafting);
  double worst_h = 0, worst_z = 0, fast_to_exact = 0;
  for (int c = 0; c < 4; ++c) {
    SCOPED_TRACE(method + " case " + std::to_string(c));
    const std::string stem = "case" + std::to_string(c);
    const json expected = read_json(kFixture / "expected" / method / (stem + ".json"));
    const std::vector<int64_t> prompt = expected["prompt_ids"].get<std::vector<int64_t>>();
    const DraftCall a = draft_case(f, *fast, prompt), b = draft_case(f, *exact, prompt);
    worst_h = std::max<double>(worst_h, max_abs_diff(a.trace.hidden, test::read_f32(kFixture / "expected" / method / (stem + ".h.f32"))));
    worst_z = std::max<double>(worst_z, max_abs_diff(a.block.logits, test::read_f32(kFixture / "expected" / method / (stem + ".z.f32"))));
    fast_to_exact = std::max(fast_to_exact, (a.block.logits - b.block.logits).abs().max().item<double>());
    EXPECT_EQ(a.block.tokens, expected["draft_tokens"].get<std::vector<int64_t>>());
  }
  std::printf("%s, bf16 dot products: max |diff| to the reference h %.2e, logits %.2e; to exact products %.2e\n",
              method.c_str(), worst_h, worst_z, fast_to_exact);
  EXPECT_LT(worst_h, 3e-2);
  EXPECT_LT(worst_z, 1.2e-1);
  if (kernels::current_isa() >= kernels::Isa::kAvx512Bf16) EXPECT_GT(fast_to_exact, 0.0);
  else EXPECT_EQ(fast_to_exact, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Methods, DeepSpecConformance, ::testing::Values("dspark", "dflash"));

TEST(DeepSpecConformance, StoredHeadIsUsedWhenTheTargetIsF32) {
  // The fixture's embed/lm_head are the f32 target's rounded to bf16: loading must accept them
  // (and use them), while a drafter whose copies differ otherwise is refused.
  torch::NoGradGuard no_grad;
  Fixture f;
  EXPECT_NO_THROW(draft::DSparkDrafter::load((kFixture / "dspark").string(), f.target, {}));
  test::TempDir dir;
  model::ModelConfig config = model::ModelConfig::load(kTarget.string());
  config.torch_dtype = "float32";
  model::write_random_checkpoint(config, dir.str(), {.seed = 5});  // same shapes, other weights
  model::Transformer other = model::Transformer::load(dir.str(), {model::WeightDType::kF32});
  try {
    draft::DSparkDrafter::load((kFixture / "dspark").string(), other, {});
    FAIL() << "a drafter for another target loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("embed_tokens.weight differs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dspark
