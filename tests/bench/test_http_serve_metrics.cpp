// The measures of `bench serve --url` on hand-computed records (vLLM's definitions), the --goodput
// flag, and the server's speculative counters read from Prometheus text.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/http_serve_metrics.h"
#include "common/error.h"
#include "expect_error.h"

namespace dspark::bench {
namespace {

RequestRecord record(int64_t prompt, int64_t tokens, double ttft, double last, double e2el, std::vector<double> itl) {
  RequestRecord r;
  r.success = true;
  r.prompt_tokens = prompt;
  r.output_tokens = tokens;
  r.usage_reported = true;
  r.content_chunks = static_cast<int64_t>(itl.size()) + 1;
  r.ttft_s = ttft;
  r.last_token_s = last;
  r.e2el_s = e2el;
  r.itl_s = std::move(itl);
  return r;
}

// A: 5 tokens, TPOT (0.5 - 0.1) / 4 = 0.1. B: 1 token (no TPOT; 0 for goodput). C: 3 tokens, TPOT
// (1.0 - 0.2) / 2 = 0.4. D failed. Over 2 s.
std::vector<RequestRecord> records() {
  RequestRecord failed;
  failed.error = "HTTP 500: boom";
  return {record(10, 5, 0.1, 0.5, 0.5, {0.1, 0.1, 0.2}), record(20, 1, 0.3, 0.3, 0.35, {}),
          record(30, 3, 0.2, 1.0, 1.0, {0.8}), failed};
}

TEST(HttpServeMetrics, PercentileInterpolatesLinearly) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({5}, 99), 5.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4.0);
}

TEST(HttpServeMetrics, TpotExcludesTheFirstToken) {
  EXPECT_DOUBLE_EQ(request_tpot_s(records()[0]), 0.1);
  EXPECT_EQ(request_tpot_s(records()[1]), 0.0);
  EXPECT_DOUBLE_EQ(request_tpot_s(records()[2]), 0.4);
}

TEST(HttpServeMetrics, SummaryCountsThroughputAndLatencies) {
  const HttpSummary s = summarize(records(), 2.0, {});
  EXPECT_EQ(s.requests, 4);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.input_tokens, 60);
  EXPECT_EQ(s.output_tokens, 9);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(s.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 34.5);
  EXPECT_EQ(s.good_requests, 0);  // no SLOs: goodput is not measured
  EXPECT_NEAR(s.ttft.mean_ms, 200, 1e-9);
  EXPECT_NEAR(s.ttft.median_ms, 200, 1e-9);
  EXPECT_NEAR(s.ttft.p99_ms, 298, 1e-9);
  EXPECT_NEAR(s.tpot.mean_ms, 250, 1e-9);  // B has no TPOT
  EXPECT_NEAR(s.tpot.p99_ms, 397, 1e-9);
  EXPECT_NEAR(s.itl.mean_ms, 300, 1e-9);    // every gap of every request pooled
  EXPECT_NEAR(s.itl.median_ms, 150, 1e-9);
  EXPECT_NEAR(s.itl.p99_ms, 782, 1e-9);
  EXPECT_NEAR(s.e2el.mean_ms, 1850.0 / 3, 1e-9);
  EXPECT_NEAR(s.e2el.median_ms, 500, 1e-9);
  EXPECT_NEAR(s.e2el.p99_ms, 990, 1e-9);
}

// Per user: 5 / 0.5 = 10, 1 / 0.3, 3 / 1.0 = 3 tokens/s (to the last content chunk).
TEST(HttpServeMetrics, PerUserSpeedIsTokensOverTimeToLastToken) {
  const HttpSummary s = summarize(records(), 2.0, {});
  EXPECT_NEAR(s.user_tps_mean, (10 + 1 / 0.3 + 3) / 3, 1e-9);
  EXPECT_NEAR(s.user_tps_p50, 1 / 0.3, 1e-9);
  EXPECT_NEAR(s.user_tps_p90, 1 / 0.3 + (10 - 1 / 0.3) * 0.8, 1e-9);
}

TEST(HttpServeMetrics, GoodputCountsRequestsWithinEverySlo) {
  Slo ttft_and_tpot{.ttft_ms = 250, .tpot_ms = 150};  // A only (B's TTFT, C's TPOT are over)
  EXPECT_EQ(summarize(records(), 2.0, ttft_and_tpot).good_requests, 1);
  EXPECT_DOUBLE_EQ(summarize(records(), 2.0, ttft_and_tpot).request_goodput, 0.5);
  Slo tpot_only{.tpot_ms = 150};  // A, and B whose one token counts as TPOT 0
  EXPECT_EQ(summarize(records(), 2.0, tpot_only).good_requests, 2);
  Slo e2el{.e2el_ms = 500};  // the bound itself is within
  EXPECT_EQ(summarize(records(), 2.0, e2el).good_requests, 2);
}

TEST(HttpServeMetrics, EmptyRunIsAllZero) {
  const HttpSummary s = summarize({}, 0.0, {});
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(s.output_throughput, 0.0);
  EXPECT_EQ(s.ttft.p99_ms, 0.0);
}

TEST(HttpServeMetrics, ParsesGoodputWords) {
  const Slo a = parse_goodput({"ttft:100", "tpot:50"});
  EXPECT_EQ(a.ttft_ms, 100);
  EXPECT_EQ(a.tpot_ms, 50);
  EXPECT_FALSE(a.e2el_ms);
  const Slo b = parse_goodput({"e2el:2000.5 ttft:1"});
  EXPECT_EQ(b.e2el_ms, 2000.5);
  EXPECT_EQ(b.ttft_ms, 1);
  EXPECT_TRUE(parse_goodput({}).empty());
  for (const std::string bad : {"ttft", "foo:1", "ttft:-1", "ttft:abc", "tpot:inf"})
    test::expect_error([&] { parse_goodput({bad}); }, {"--goodput", bad});
}

// vLLM's exposition: counters with _total and a _created companion, two engines to sum, positions
// out of order, a label value with escapes, a timestamp, and two lines that are not samples.
const char* kVllmMetrics = R"(# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{model_name="m"} 70
vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 25
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"} 9
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="2"} 4
vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1",model_name="m",} 7
vllm:num_requests_running{model_name="odd \"name\", {x} \\ y"} 3
vllm:generation_tokens_total 1e3 1700000000000
garbage line without a value
vllm:broken{model_name="unterminated} 5
)";

TEST(HttpServeMetrics, ParsesPrometheusSamples) {
  const std::vector<PromSample> samples = parse_prometheus(kVllmMetrics);
  ASSERT_EQ(samples.size(), 10u);  // the two bad lines skipped
  EXPECT_EQ(samples[0].name, "vllm:spec_decode_num_drafts_total");
  ASSERT_NE(samples[0].label("engine"), nullptr);
  EXPECT_EQ(*samples[0].label("engine"), "0");
  EXPECT_EQ(samples[0].value, 10.0);
  EXPECT_EQ(samples[2].value, 1.7e9);
  EXPECT_EQ(*samples[8].label("model_name"), "odd \"name\", {x} \\ y");
  EXPECT_EQ(samples[8].value, 3.0);
  EXPECT_EQ(samples[9].name, "vllm:generation_tokens_total");
  EXPECT_EQ(samples[9].value, 1000.0);  // the timestamp is not the value
  EXPECT_EQ(samples[9].label("model_name"), nullptr);
}

TEST(HttpServeMetrics, SumsVllmSpecCounters) {
  const std::optional<SpecCounters> c = find_spec_counters(parse_prometheus(kVllmMetrics));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->num_drafts, 15);  // both engines, not the _created timestamp
  EXPECT_EQ(c->num_draft_tokens, 70);
  EXPECT_EQ(c->num_accepted_tokens, 25);
  EXPECT_EQ(c->accepted_per_pos, (std::vector<double>{9, 7, 4}));
  EXPECT_DOUBLE_EQ(c->acceptance_rate(), 25.0 / 70);
  EXPECT_DOUBLE_EQ(c->mean_acceptance_length(), 1 + 25.0 / 15);
  EXPECT_EQ(c->acceptance_per_pos(), (std::vector<double>{9.0 / 15, 7.0 / 15, 4.0 / 15}));
}

// llama.cpp's counters carry no _total suffix.
TEST(HttpServeMetrics, ReadsLlamaCppSpecCounters) {
  const std::optional<SpecCounters> c = find_spec_counters(parse_prometheus(
      "llamacpp:spec_decode_num_drafts 4\nllamacpp:spec_decode_num_draft_tokens 12\r\n"
      "llamacpp:spec_decode_num_accepted_tokens 6\nllamacpp:spec_decode_num_accepted_tokens_per_pos{position=\"1\"} 2\n"
      "llamacpp:tokens_predicted_total 99\n"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->num_drafts, 4);
  EXPECT_EQ(c->num_draft_tokens, 12);
  EXPECT_EQ(c->num_accepted_tokens, 6);
  EXPECT_EQ(c->accepted_per_pos, (std::vector<double>{0, 2}));
}

TEST(HttpServeMetrics, NoSpecCountersWithoutSpeculation) {
  EXPECT_FALSE(find_spec_counters(parse_prometheus("vllm:num_requests_running 0\nvllm:generation_tokens_total 5\n")));
  EXPECT_FALSE(find_spec_counters(parse_prometheus("")));
}

TEST(HttpServeMetrics, DeltaSubtractsPositionByPosition) {
  const SpecCounters after{.num_drafts = 15, .num_draft_tokens = 70, .num_accepted_tokens = 25,
                           .accepted_per_pos = {9, 7, 4}};
  const SpecCounters before{.num_drafts = 5, .num_draft_tokens = 20, .num_accepted_tokens = 5, .accepted_per_pos = {3}};
  const SpecCounters d = counters_delta(after, before);
  EXPECT_EQ(d.num_drafts, 10);
  EXPECT_EQ(d.num_draft_tokens, 50);
  EXPECT_EQ(d.num_accepted_tokens, 20);
  EXPECT_EQ(d.accepted_per_pos, (std::vector<double>{6, 7, 4}));
}

// dspark serve's engine counters give the in-process budget; other servers have none.
TEST(HttpServeMetrics, ReadsDsparkEngineCounters) {
  const std::optional<EngineCounters> c = find_engine_counters(parse_prometheus(
      "dspark:verified_draft_tokens_total 30\ndspark:decode_request_steps_total 12\n"
      "dspark:draft_seconds_total 0.5\ndspark:engine_steps_total 7\n"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->mean_budget(), 2.5);
  EXPECT_EQ(c->draft_seconds, 0.5);
  const EngineCounters d = counters_delta(*c, {.verified_draft_tokens = 10, .decode_request_steps = 2});
  EXPECT_EQ(d.mean_budget(), 2.0);
  EXPECT_FALSE(find_engine_counters(parse_prometheus(kVllmMetrics)));
}

}  // namespace
}  // namespace dspark::bench
