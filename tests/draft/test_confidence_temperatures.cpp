// STS temperatures saved beside a DSpark drafter (sts.json, written by `dspark calibrate`) are
// applied at load: c_k = sigmoid(logit_k / T_k), slots beyond the list keep T = 1.
#include <gtest/gtest.h>

#include <cmath>

#include "calibrate/sts_file.h"
#include "common/error.h"
#include "draft/draft_init.h"
#include "draft/dspark_drafter.h"
#include "sampling/sampling.h"
#include "test_util.h"

namespace dspark {
namespace {

std::vector<float> first_block_confidences(const std::string& dir, const model::Transformer& target) {
  auto drafter = draft::DSparkDrafter::load(dir, target, {.max_slots = 1, .capacity = 64});
  std::vector<int64_t> prompt = {5, 9, 14, 20};
  const int64_t width = target.config().hidden_size * static_cast<int64_t>(drafter->target_layer_ids().size());
  at::Generator gen = at::detail::createCPUGenerator(3);
  drafter->begin(0, prompt, torch::randn({4, width}, gen));
  sampling::SamplingParams greedy{.temperature = 0};
  sampling::Rng rng(1);
  return drafter->propose({{0, 7, 3, 0.0, &greedy, &rng}})[0].confidence;
}

double logit(double p) { return std::log(p / (1 - p)); }

TEST(ConfidenceTemperatures, StsFileRescalesTheLogitsPerSlot) {
  model::Transformer target = model::Transformer::load(test::fixture("tiny-qwen3-tied").string(), {model::WeightDType::kF32});
  test::TempDir dir;
  draft::DrafterInitOptions init{.method = draft::DraftMethod::kDSpark, .seed = 2, .block_size = 3};
  const draft::DraftConfig config = draft::make_draft_config(target.config(), init);
  auto tensors = draft::random_drafter_tensors(target, config, 2);
  for (auto& [name, t] : tensors)
    if (name == "confidence_head.proj.weight") t = t * 10;  // confidences away from 0.5, so scaling shows
  draft::write_drafter(config, tensors, dir.str());
  const std::vector<float> raw = first_block_confidences(dir.str(), target);
  ASSERT_EQ(raw.size(), 3u);
  test::write_text(dir / calibrate::kStsFile, R"({"temperatures": [2.0, 0.5]})");
  const std::vector<float> scaled = first_block_confidences(dir.str(), target);
  ASSERT_EQ(scaled.size(), 3u);
  EXPECT_GT(std::abs(logit(raw[0])), 0.05);
  EXPECT_NEAR(logit(scaled[0]), logit(raw[0]) / 2.0, 1e-3);
  EXPECT_NEAR(logit(scaled[1]), logit(raw[1]) / 0.5, 1e-3);
  EXPECT_NEAR(scaled[2], raw[2], 1e-6);  // no temperature for slot 3

  test::write_text(dir / calibrate::kStsFile, R"({"temperatures": [0.0]})");
  EXPECT_THROW(first_block_confidences(dir.str(), target), Error);
  test::write_text(dir / calibrate::kStsFile, R"({"temperatures": [1, 1, 1, 1]})");
  EXPECT_THROW(first_block_confidences(dir.str(), target), Error);
}

}  // namespace
}  // namespace dspark
