// read_json_file / write_json_file: a round trip keeps the document, and every failure is a
// one-line error naming the file, including a write that fails only when the buffer is flushed
// (/dev/full accepts the open and refuses the bytes, as a full disk does).
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "common/json_file.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark {
namespace {

using test::expect_error;

TEST(JsonFile, WritesWhatItReadsBack) {
  test::TempDir tmp;
  const nlohmann::json doc = {{"tau", 2.511}, {"files", {"gsm8k", "mbpp"}}};
  write_json_file(tmp.file("out.json"), doc);
  EXPECT_EQ(read_json_file(tmp.file("out.json")), doc);
  EXPECT_EQ(test::read_text(tmp.file("out.json")).back(), '\n');
}

TEST(JsonFile, AFullDiskIsAnErrorNotALostFile) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  expect_error([] { write_json_file("/dev/full", nlohmann::json{{"tau", 1.0}}); }, {"/dev/full: write failed"});
}

TEST(JsonFile, OpenAndParseFailuresNameTheFile) {
  test::TempDir tmp;
  expect_error([&] { write_json_file(tmp.file("no/such/dir/out.json"), nlohmann::json::object()); },
               {"out.json: cannot open for writing"});
  expect_error([&] { read_json_file(tmp.file("missing.json")); }, {"missing.json: cannot open"});
  test::write_text(tmp.file("bad.json"), "{\"tau\": ");
  expect_error([&] { read_json_file(tmp.file("bad.json")); }, {"bad.json: not valid JSON"});
}

}  // namespace
}  // namespace dspark
