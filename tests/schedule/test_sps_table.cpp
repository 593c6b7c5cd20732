// The SPS(B) cost table: exact lookup, the edge of the table, validation, JSON round trip and errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "expect_error.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {
namespace {

using nlohmann::json;

SpsMeta meta() { return {"qwen3-0.6b", "gpu-host-1", "cuda:0 NVIDIA H200", "bf16", "2025-06-01T12:00:00Z"}; }

// Jagged on purpose: a cliff at B = 4 and a rise at B = 6 (e.g. a better kernel from there on);
// 0.1 + 0.2 has no short decimal form, so the JSON round trip must keep all 17 digits.
const std::vector<double> kJagged{100.0, 98.5, 97.25, 60.125, 59.0, 70.0, 0.1 + 0.2};

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("dspark-sps-" + std::to_string(getpid()) + "-" + name);
}

TEST(SpsTable, LooksUpExactlyWhatWasMeasured) {
  const SpsTable table(kJagged, meta());
  ASSERT_EQ(table.max_tokens(), 7);
  for (int64_t b = 1; b <= 7; ++b) EXPECT_EQ(table.sps(b), kJagged[static_cast<size_t>(b - 1)]) << b;
  EXPECT_TRUE(table.covers(1));
  EXPECT_TRUE(table.covers(7));
  EXPECT_FALSE(table.covers(0));
  EXPECT_FALSE(table.covers(8));
}

TEST(SpsTable, OutsideTheMeasuredRangeThrows) {
  const SpsTable table(kJagged);
  test::expect_error([&] { table.sps(8); }, {"B = 1..7", "B = 8", "token budget"});
  test::expect_error([&] { table.sps(0); }, {"B = 0"});
}

TEST(SpsTable, ThroughputIsTauTimesSps) {
  const SpsTable table(kJagged);
  EXPECT_DOUBLE_EQ(throughput(2.5, 4, table), 2.5 * 60.125);
  test::expect_error([&] { throughput(1.0, 9, table); }, {"B = 9"});
}

TEST(SpsTable, RejectsNonPositiveOrMissingValues) {
  test::expect_error([] { SpsTable({}); }, {"no entries"});
  test::expect_error([] { SpsTable({1.0, 0.0}); }, {"SPS(2)", "> 0"});
  test::expect_error([] { SpsTable({1.0, 2.0, -3.0}); }, {"SPS(3)"});
  test::expect_error([] { SpsTable({std::nan("")}); }, {"SPS(1)"});
  test::expect_error([] { SpsTable({std::numeric_limits<double>::infinity()}); }, {"SPS(1)"});
}

TEST(SpsTable, JsonRoundTripKeepsEveryBit) {
  const SpsTable table(kJagged, meta());
  const SpsTable back = SpsTable::from_json(json::parse(table.to_json().dump()), "test");
  ASSERT_EQ(back.max_tokens(), table.max_tokens());
  for (int64_t b = 1; b <= table.max_tokens(); ++b) EXPECT_EQ(back.sps(b), table.sps(b)) << b;  // bitwise
  EXPECT_EQ(back.meta().model_id, "qwen3-0.6b");
  EXPECT_EQ(back.meta().machine_id, "gpu-host-1");
  EXPECT_EQ(back.meta().device, "cuda:0 NVIDIA H200");
  EXPECT_EQ(back.meta().dtype, "bf16");
  EXPECT_EQ(back.meta().measured_date, "2025-06-01T12:00:00Z");
}

TEST(SpsTable, SaveAndLoadAFile) {
  const std::filesystem::path path = temp_file("roundtrip.json");
  SpsTable(kJagged, meta()).save(path);
  const SpsTable back = SpsTable::load(path);
  std::filesystem::remove(path);
  EXPECT_EQ(std::vector<double>(back.values().begin(), back.values().end()), kJagged);
  EXPECT_TRUE(back.meta().same_setup(meta()));
}

json good_json() { return SpsTable(kJagged, meta()).to_json(); }

TEST(SpsTable, MissingOrBadKeysAreNamed) {
  for (const char* key : {"format", "model_id", "machine_id", "device", "dtype", "measured_date"}) {
    json j = good_json();
    j.erase(key);
    test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"cache.json", key});
  }
  json j = good_json();
  j.erase("steps_per_second");
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"steps_per_second"});
  j = good_json();
  j.erase("version");
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"version"});
  j = good_json();
  j["version"] = 2;
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"version"});
  j = good_json();
  j["format"] = "something-else";
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"format"});
  j = good_json();
  j["model_id"] = "";
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"empty", "model_id"});
  j = good_json();
  j["dtype"] = 16;
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"dtype"});
  test::expect_error([] { SpsTable::from_json(json::array(), "cache.json"); }, {"not a JSON object"});
}

TEST(SpsTable, BadValuesAreNamed) {
  json j = good_json();
  j["steps_per_second"][3] = 0.0;
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"cache.json", "SPS(4)", "> 0"});
  j = good_json();
  j["steps_per_second"][1] = -1.5;
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"SPS(2)"});
  j = good_json();
  j["steps_per_second"][0] = "fast";
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"SPS(1)", "not a number"});
  j = good_json();
  j["steps_per_second"] = json::array();
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"no entries"});
  j = good_json();
  j["steps_per_second"] = 3.0;
  test::expect_error([&] { SpsTable::from_json(j, "cache.json"); }, {"non-array"});
}

TEST(SpsTable, BadFilesAreNamed) {
  const std::filesystem::path path = temp_file("broken.json");
  { std::ofstream(path) << "{ \"format\": \"dspark-sps-table\", "; }
  test::expect_error([&] { SpsTable::load(path); }, {path.string(), "not valid JSON"});
  std::filesystem::remove(path);
  test::expect_error([&] { SpsTable::load(temp_file("missing.json")); }, {"missing.json", "cannot open"});
}

TEST(SpsTable, CacheKeyAndSameSetup) {
  SpsMeta m = meta();
  EXPECT_EQ(cache_file_name(m), "sps-qwen3-0.6b--gpu-host-1--cuda_0_NVIDIA_H200--bf16.json");
  SpsMeta later = m;
  later.measured_date = "2026-01-01";
  EXPECT_TRUE(m.same_setup(later));
  for (std::string SpsMeta::*field : {&SpsMeta::model_id, &SpsMeta::machine_id, &SpsMeta::device, &SpsMeta::dtype}) {
    SpsMeta other = m;
    other.*field += "x";
    EXPECT_FALSE(m.same_setup(other));
  }
}

}  // namespace
}  // namespace dspark::schedule
