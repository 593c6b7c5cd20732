// The request contract (engine/request.h): the context limit and every refusal, each naming the
// numbers involved.
#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/request.h"
#include "expect_error.h"

namespace dspark::engine {
namespace {

model::ModelConfig config_with_positions(int64_t positions) {
  model::ModelConfig c;
  c.max_position_embeddings = positions;
  c.vocab_size = 100;
  return c;
}

TEST(ContextLimit, IsTheModelsPositionsUnlessLessIsAsked) {
  const model::ModelConfig c = config_with_positions(4096);
  EXPECT_EQ(context_limit(c), 4096);
  EXPECT_EQ(context_limit(c, 1000), 1000);
  EXPECT_EQ(context_limit(c, 4096), 4096);
  test::expect_error([&] { context_limit(c, 5000); }, {"5000", "4096", "max_position_embeddings"});
  test::expect_error([&] { context_limit(c, -1); }, {">= 0"});
}

TEST(CheckRequest, RefusesEachBadFieldByName) {
  const RequestLimits limits{.vocab_size = 100, .max_context = 4096, .can_detokenize = false};
  const EngineRequest good{{1, 2, 3}, {.temperature = 0}, 16};
  EXPECT_NO_THROW(check_request(good, limits));

  EngineRequest r = good;
  r.max_tokens = 5000;  // 3 + 5000 > 4096: refused before any work, with both numbers
  test::expect_error([&] { check_request(r, limits); }, {"5000", "5003", "4096"});
  r = good;
  r.max_tokens = 4093;  // exactly the limit
  EXPECT_NO_THROW(check_request(r, limits));
  r = good;
  r.sampling.temperature = -1;
  test::expect_error([&] { check_request(r, limits); }, {"temperature", "-1"});
  r = good;
  r.prompt_ids.clear();
  test::expect_error([&] { check_request(r, limits); }, {"prompt is empty"});
  r = good;
  r.prompt_ids = {1, 100};
  test::expect_error([&] { check_request(r, limits); }, {"100", "out of range"});
  r = good;
  r.max_tokens = -2;
  test::expect_error([&] { check_request(r, limits); }, {"max_tokens", "-2"});
  r = good;
  r.stop_strings = {"\n"};
  test::expect_error([&] { check_request(r, limits); }, {"stop strings"});
  r = good;
  r.confidence_threshold = 1.5;
  test::expect_error([&] { check_request(r, limits); }, {"confidence threshold"});
}

}  // namespace
}  // namespace dspark::engine
