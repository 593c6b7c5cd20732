// `dspark draft`: one drafted block after a prompt, as text or JSON. Every drafter prints its
// slots; an n-gram drafter's have no logits to rank (it once crashed in libtorch on a match).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "test_util.h"

namespace dspark {
namespace {

using nlohmann::json;

const std::string kModel = std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l";

json draft_json(const std::string& flags) {
  const test::CommandResult r = test::run_dspark("draft --target " + kModel + " --json " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

TEST(DraftCli, DSparkSlotsCarryTheirTopFiveAndConfidence) {
  const json block = draft_json("--draft " + kModel + "-dspark --prompt-ids 1,2,3,4 --gamma 3");
  ASSERT_EQ(block["slots"].size(), 3u);
  for (const json& slot : block["slots"]) {
    EXPECT_EQ(slot["top5"].size(), 5u);
    EXPECT_EQ(slot["top5"][0]["id"], slot["token"]);  // greedy by default: the top logit
    EXPECT_TRUE(slot.contains("confidence"));
  }
}

// The prompt repeats 1,2,3,4, so after anchor 4 the n-gram proposes 1,2,3 (q = 1 each).
TEST(DraftCli, NgramSlotsPrintWithoutLogits) {
  const json block = draft_json("--method ngram --prompt-ids 1,2,3,4,1,2,3,4,1,2,3 --anchor 4 --gamma 3");
  ASSERT_EQ(block["method"], "ngram");
  ASSERT_EQ(block["slots"].size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(block["slots"][k]["token"], k + 1);
    EXPECT_EQ(block["slots"][k]["draft_prob"], 1.0);
    EXPECT_TRUE(block["slots"][k]["top5"].empty());
  }
  const test::CommandResult text = test::run_dspark("draft --target " + kModel +
                                                    " --method ngram --prompt-ids 1,2,3,4,1,2,3,4,1,2,3 --anchor 4");
  EXPECT_EQ(text.exit_code, 0) << text.err;
}

}  // namespace
}  // namespace dspark
