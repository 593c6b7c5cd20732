// sts.json (calibrate/sts_file.h): what calibrate writes is what the drafter reads; a missing file
// means no temperatures; a bad one is a one-line error naming the file.
#include <gtest/gtest.h>

#include "calibrate/sts_file.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark::calibrate {
namespace {

TEST(StsFile, WrittenTemperaturesAreReadBack) {
  test::TempDir dir;
  EXPECT_FALSE(read_sts_temperatures(dir.path()).has_value());
  StsPositionReport first{.position = 0, .n = 40, .label_mean = 0.7}, unused{.position = 1, .n = 0};
  write_sts_file(dir.path(), {.temperatures = {1.5, 0.75}, .rounds = 40, .prompts = 8, .source = "valid.jsonl",
                              .sampling_temperature = 1.0, .gamma = 2, .positions = {first, unused}});
  EXPECT_EQ(read_sts_temperatures(dir.path()), (std::vector<double>{1.5, 0.75}));
  const std::string text = test::read_text(dir / kStsFile);
  EXPECT_NE(text.find("\"source\": \"valid.jsonl\""), std::string::npos);
  EXPECT_EQ(text.find("\"position\": 2"), std::string::npos);  // positions without rounds are left out
}

TEST(StsFile, BadFilesAreOneLineErrorsNamingTheFile) {
  test::TempDir dir;
  test::write_text(dir / kStsFile, R"({"temperatures": [1.0, -2.0]})");
  test::expect_error([&] { read_sts_temperatures(dir.path()); }, {kStsFile, "positive"});
  test::write_text(dir / kStsFile, R"({"rounds": 3})");
  test::expect_error([&] { read_sts_temperatures(dir.path()); }, {kStsFile, "temperatures"});
  test::write_text(dir / kStsFile, "{");
  test::expect_error([&] { read_sts_temperatures(dir.path()); }, {kStsFile});
}

}  // namespace
}  // namespace dspark::calibrate
