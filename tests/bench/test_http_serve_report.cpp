// The report of `bench serve --url`: JSON comparable with the in-process benchmark's, the vLLM-style
// Markdown table, and the plots.
#include <gtest/gtest.h>

#include "bench/http_serve_report.h"
#include "bench/serve_report.h"
#include "test_util.h"

namespace dspark::bench {
namespace {

RequestRecord ok_record(int64_t tokens, double ttft, double e2el) {
  RequestRecord r;
  r.success = true;
  r.output_tokens = tokens;
  r.prompt_tokens = 4;
  r.ttft_s = ttft;
  r.last_token_s = r.e2el_s = e2el;
  return r;
}

HttpPoint point(int64_t cap, bool with_spec) {
  HttpRun run;
  run.records = {ok_record(10, 0.1, 1.0), ok_record(20, 0.2, 2.0)};
  RequestRecord failed;
  failed.error = "HTTP 503: queue full";
  run.records.push_back(failed);
  run.records.push_back(failed);
  run.seconds = 4.0;
  if (with_spec) {
    run.counters.spec = SpecCounters{.num_drafts = 10, .num_draft_tokens = 40, .num_accepted_tokens = 20,
                                     .accepted_per_pos = {8, 6}};
    run.counters.engine = EngineCounters{.verified_draft_tokens = 40, .decode_request_steps = 16, .draft_seconds = 1};
  }
  return make_http_point("dspark-async", {.url = "http://127.0.0.1:1"}, {.model = "tiny"},
                         {.max_concurrency = cap, .num_requests = 4}, {.ttft_ms = 150}, run);
}

TEST(HttpServeReport, PointCountsFailuresByReason) {
  const HttpPoint p = point(8, false);
  EXPECT_EQ(p.summary.completed, 2);
  EXPECT_EQ(p.summary.good_requests, 1);  // TTFT 100 ms within 150, 200 ms not
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].first, "HTTP 503: queue full");
  EXPECT_EQ(p.errors[0].second, 2);
}

// Every key of an in-process point is there with its meaning (aggregate = 30 tokens / 4 s; budget
// 40 drafts / 16 request-steps; drafting 1 s of 4); what the server does not say is null; vLLM's
// measures and the counters follow.
TEST(HttpServeReport, JsonHasTheInProcessKeys) {
  const nlohmann::json j = to_json(point(8, true));
  const nlohmann::json in_process = to_json(ServePoint{});
  for (const auto& [key, value] : in_process.items()) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["concurrency"], 8);
  EXPECT_EQ(j["requests"], 4);
  EXPECT_EQ(j["output_tokens"], 30);
  EXPECT_DOUBLE_EQ(j["aggregate_tps"].get<double>(), 7.5);
  EXPECT_DOUBLE_EQ(j["user_tps_mean"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["mean_budget"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["draft_share"].get<double>(), 0.25);
  EXPECT_TRUE(j["acceptance_length"].is_null());
  EXPECT_TRUE(j["request_rate"].is_null());  // inf
  EXPECT_EQ(j["failed"], 2);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["median"].get<double>(), 150.0);
  EXPECT_DOUBLE_EQ(j["spec_decode"]["mean_acceptance_length"].get<double>(), 3.0);
  EXPECT_EQ(j["spec_decode"]["acceptance_per_pos"], (std::vector<double>{0.8, 0.6}));
  EXPECT_EQ(j["goodput_slo"]["ttft_ms"], 150.0);
  EXPECT_EQ(j["errors"][0]["count"], 2);
  const nlohmann::json other_server = to_json(point(8, false));
  EXPECT_TRUE(other_server["spec_decode"].is_null());
  EXPECT_TRUE(other_server["mean_budget"].is_null());
  EXPECT_TRUE(other_server["draft_share"].is_null());
}

TEST(HttpServeReport, MarkdownHasAColumnPerPointAndTheAcceptanceRows) {
  const std::string md = http_markdown({point(1, true), point(8, false)});
  EXPECT_NE(md.find("| metric | dspark-async C=1 | dspark-async C=8 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Output token throughput, aggregate (tok/s) | 7.50 | 7.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Request goodput (req/s) | 0.25 | 0.25 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Mean acceptance length | 3.00 | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Verification budget (drafts/request/step) | 2.50 | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Median TTFT (ms) | 150.00 | 150.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Acceptance at position 1 | 0.60 | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("dspark-async C=8: 2 x HTTP 503: queue full"), std::string::npos) << md;
  EXPECT_EQ(http_markdown({point(1, false)}).find("acceptance"), std::string::npos);
}

// Another server's points: no budget chart (it would be an empty frame); dspark serve's: all three.
TEST(HttpServeReport, WritesThroughputAndLatencyPlots) {
  test::TempDir dir;
  write_http_plots(dir.path(), {point(1, false), point(8, false)});
  EXPECT_NE(test::read_text(dir / "serve_throughput.svg").find("<svg"), std::string::npos);
  const std::string latency = test::read_text(dir / "serve_latency.svg");
  EXPECT_NE(latency.find("TTFT against concurrency"), std::string::npos);
  EXPECT_NE(latency.find("dspark-async p99"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "serve_budget.svg"));
  write_http_plots(dir.path(), {point(1, true), point(8, true)});
  EXPECT_NE(test::read_text(dir / "serve_budget.svg").find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace dspark::bench
