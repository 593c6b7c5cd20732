// Device selection (model/device.h): the names --device and DSPARK_TEST_DEVICE accept, the labels
// profiles are keyed by, and LoadOptions following the process-wide default.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "engine/step_cost.h"
#include "model/device.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dspark::model {
namespace {

void expect_error(const std::string& name, const std::string& fragment) {
  try {
    parse_device(name, "--device");
    ADD_FAILURE() << "'" << name << "' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--device"), std::string::npos) << e.what();
  }
}

TEST(Device, ParsesCpuAndRejectsOtherNames) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  for (const std::string bad : {"", "gpu", "CUDA", "cuda:", "cuda:x", "cpu:0", "cuda:0 "}) expect_error(bad, "'" + bad + "'");
}

TEST(Device, CudaNeedsACudaLibtorch) {
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(parse_device("cuda").is_cuda());
    expect_error("cuda:999", "CUDA device(s) visible");
  } else {
    expect_error("cuda", "no usable CUDA");
    expect_error("cuda:0", "no usable CUDA");
  }
}

TEST(Device, LabelNamesTheIndex) {
  EXPECT_EQ(device_label(torch::kCPU), "cpu");
  EXPECT_EQ(device_label(torch::Device("cuda")), "cuda:0");
  EXPECT_EQ(device_label(torch::Device("cuda:3")), "cuda:3");
}

TEST(Device, LoadOptionsStartFromTheDefault) {
  const torch::Device before = default_device();
  EXPECT_EQ(before.str(), test::test_device_name());  // tests/test_device_default.cpp set it
  set_default_device(torch::Device("cuda:1"));  // only recorded: nothing is allocated there
  EXPECT_EQ(LoadOptions{}.device, torch::Device("cuda:1"));
  EXPECT_EQ(LoadOptions{.weight_dtype = WeightDType::kF32}.device, torch::Device("cuda:1"));
  set_default_device(before);
  EXPECT_EQ(LoadOptions{}.device, before);
}

// The step-cost profile (and so the SPS table cached from it) is keyed by the device the target
// was loaded on, with the index explicit.
TEST(Device, StepCostMetaNamesTheTargetsDevice) {
  torch::NoGradGuard no_grad;
  const std::string dir = test::fixture("tiny-qwen3-tied").string();
  const Transformer target = Transformer::load(dir, {WeightDType::kF32});
  const schedule::SpsMeta meta = engine::step_cost_meta(dir, target, "");
  EXPECT_EQ(meta.device, device_label(target.device()));
  if (target.device().is_cpu()) {
    EXPECT_EQ(meta.device, "cpu");
  }
  schedule::SpsMeta elsewhere = meta;
  elsewhere.device = meta.device == "cpu" ? "cuda:0" : "cpu";
  EXPECT_FALSE(meta.same_setup(elsewhere));
  EXPECT_NE(schedule::cache_file_name(meta), schedule::cache_file_name(elsewhere));
}

}  // namespace
}  // namespace dspark::model
