// The drafter trainer's feature cache: bytes back as stored, across reopening; a tail cut by an
// interruption dropped on open; a cache of another run refused; the fingerprint following the
// target's weights and the data.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "test_util.h"
#include "train/feature_cache.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
using train::FeatureCache;
using train::TargetFeatures;

const nlohmann::json kPrint = {{"data", "a"}, {"device", "cpu"}};

TargetFeatures features_of(int64_t rows, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  return {torch::randn({rows, 6}), torch::randn({rows, 2}).to(torch::kBFloat16)};
}

void expect_same(const std::optional<TargetFeatures>& got, const TargetFeatures& want) {
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->features.scalar_type(), want.features.scalar_type());
  EXPECT_EQ(got->final_hidden.scalar_type(), want.final_hidden.scalar_type());
  EXPECT_TRUE(torch::equal(got->features, want.features));
  EXPECT_TRUE(torch::equal(got->final_hidden, want.final_hidden));
}

TEST(FeatureCache, GivesBackTheStoredBytesAcrossReopening) {
  test::TempDir dir;
  const TargetFeatures a = features_of(5, 1), b = features_of(3, 2);
  {
    FeatureCache cache(dir / "c", kPrint);
    EXPECT_FALSE(cache.find("a").has_value());
    cache.put("a", a);
    cache.put("b", b);
    expect_same(cache.find("a"), a);
    expect_same(cache.find("b"), b);
  }
  FeatureCache reopened(dir / "c", kPrint);
  EXPECT_EQ(reopened.size(), 2u);
  expect_same(reopened.find("b"), b);
  expect_same(reopened.find("a"), a);
  EXPECT_FALSE(reopened.find("c").has_value());
}

// An interruption can leave bytes without their index line, or half a line: both are dropped,
// what was whole stays, and new entries append after it.
TEST(FeatureCache, DropsATailCutByAnInterruption) {
  test::TempDir dir;
  const TargetFeatures a = features_of(4, 3), b = features_of(7, 4), c = features_of(2, 5);
  {
    FeatureCache cache(dir / "c", kPrint);
    cache.put("a", a);
    cache.put("b", b);
  }
  {
    std::ofstream(dir / "c/features.bin", std::ios::binary | std::ios::app) << "bytes of a conversation never indexed";
    std::ofstream(dir / "c/index.jsonl", std::ios::app) << R"({"id": "x", "offset": )";
  }
  {
    FeatureCache cache(dir / "c", kPrint);
    EXPECT_EQ(cache.size(), 2u);
    expect_same(cache.find("b"), b);
    cache.put("c", c);
  }
  FeatureCache cache(dir / "c", kPrint);
  EXPECT_EQ(cache.size(), 3u);
  expect_same(cache.find("a"), a);
  expect_same(cache.find("b"), b);
  expect_same(cache.find("c"), c);
  EXPECT_FALSE(cache.find("x").has_value());

  // Bytes cut short under a whole index line: that entry and any after it go.
  fs::resize_file(dir / "c/features.bin", fs::file_size(dir / "c/features.bin") - 1);
  FeatureCache cut(dir / "c", kPrint);
  EXPECT_EQ(cut.size(), 2u);
  EXPECT_FALSE(cut.find("c").has_value());
  expect_same(cut.find("b"), b);
}

TEST(FeatureCache, RefusesACacheMadeForAnotherRun) {
  test::TempDir dir;
  { FeatureCache cache(dir / "c", kPrint); }
  nlohmann::json other = kPrint;
  other["data"] = "b";
  try {
    FeatureCache cache(dir / "c", other);
    FAIL() << "opened a cache of another data file";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir / "c").string()), std::string::npos) << what;
    EXPECT_NE(what.find("\"data\""), std::string::npos) << what;
  }
}

TEST(FeatureCache, FingerprintFollowsTheWeightsAndTheData) {
  test::TempDir dir;
  fs::create_directories(dir / "target");
  std::ofstream(dir / "target/config.json") << "{}";
  std::ofstream(dir / "target/model.safetensors") << "weights";
  std::ofstream(dir / "data.jsonl") << "conversations";
  const auto print = [&] { return FeatureCache::fingerprint(dir / "target", dir / "data.jsonl", {1, 3}, true, "cpu"); };
  const nlohmann::json before = print();
  EXPECT_EQ(print(), before);
  std::ofstream(dir / "target/model.safetensors") << "weightz";
  const nlohmann::json retrained = print();
  EXPECT_NE(retrained, before);
  std::ofstream(dir / "data.jsonl") << "regenerated";
  EXPECT_NE(print(), retrained);
  EXPECT_NE(FeatureCache::fingerprint(dir / "target", dir / "data.jsonl", {1, 2}, true, "cpu"), print());
}

}  // namespace
}  // namespace dspark
