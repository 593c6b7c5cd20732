// scripts/device_check.sh and scripts/hf_reference.py, checked here without a GPU: the carried
// Debian packages unpack into a prefix that a configure and a build against this machine's CPU
// libtorch take their headers and libraries from; the stage runner records a failing stage and
// still runs (or records) the rest; the comparison helpers fail on what they must catch.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = DSPARK_SOURCE_DIR;
const fs::path kCarry = kSource / ".device-carry";

std::string script(const std::string& name) { return (kSource / "scripts" / name).string(); }

// The CMake prefix of the libtorch the suite was built with (its Torch_DIR's parent).
std::string torch_cmake_prefix() {
  const std::string cache = test::read_text(fs::path(DSPARK_BINARY).parent_path() / "CMakeCache.txt");
  std::smatch m;
  if (!std::regex_search(cache, m, std::regex("Torch_DIR:PATH=([^\n]*)"))) return "";
  return fs::path(m[1].str()).parent_path().string();
}

TEST(DeviceCheck, CarriedPackagesUnpackConfigureAndBuild) {
  if (!fs::exists(kCarry / "debs"))
    GTEST_SKIP() << kCarry << "/debs is missing: run scripts/fetch_device_debs.sh (scripts/test.sh does)";
  test::TempDir dir;
  const std::string prefix = dir.file("prefix"), build = dir.file("build");
  const test::CommandResult unpack = test::run_command(script("device_check.sh") + " unpack " +
                                                       (kCarry / "debs").string() + " " + prefix);
  ASSERT_EQ(unpack.exit_code, 0) << unpack.err;
  // Built on Debian 12: nothing may need a glibc newer than Ubuntu 22.04's 2.35.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(unpack.out, m, std::regex("needed: GLIBC_2\\.([0-9]+)"))) << unpack.out;
  EXPECT_LE(std::stoi(m[1].str()), 35) << unpack.out;
  for (const char* f : {"usr/include/nlohmann/json.hpp", "usr/include/CLI/CLI.hpp", "usr/include/gtest/gtest.h",
                        "usr/include/pcre2.h", "usr/include/utf8proc.h", "usr/bin/pkgconf",
                        "usr/lib/x86_64-linux-gnu/libpcre2-8.so.0", "usr/lib/x86_64-linux-gnu/libutf8proc.so.2"})
    EXPECT_TRUE(fs::exists(fs::path(prefix) / f)) << f;

  // Configure, then compile the objects of the torch-free library that use nlohmann-json, PCRE2
  // and utf8proc (a test object would wait for the whole dspark binary): every -I and every
  // library, GoogleTest's included, must come from the prefix.
  const std::string objects =
      " CMakeFiles/dspark_base.dir/src/common/json_file.cpp.o CMakeFiles/dspark_base.dir/src/tokenizer/regex.cpp.o"
      " CMakeFiles/dspark_base.dir/src/tokenizer/unicode.cpp.o";
  const test::CommandResult configure = test::run_command(
      "CCACHE_DISABLE=1 " + script("device_check.sh") + " configure " + prefix + " " + build + " " +
      torch_cmake_prefix() + objects);
  ASSERT_EQ(configure.exit_code, 0) << configure.out << configure.err;
  const std::string commands = test::read_text(fs::path(build) / "compile_commands.json");
  EXPECT_NE(commands.find(prefix + "/usr/include"), std::string::npos);
  const std::string ninja = test::read_text(fs::path(build) / "build.ninja");
  for (const char* lib : {"libpcre2-8.so", "libutf8proc.so", "libgtest.a", "libgtest_main.a"})
    EXPECT_NE(ninja.find(prefix + "/usr/lib/x86_64-linux-gnu/" + lib), std::string::npos) << lib;
  EXPECT_TRUE(fs::exists(fs::path(build) / "CMakeFiles/dspark_base.dir/src/tokenizer/regex.cpp.o"));
  // The object's dependency list names the carried header, not the system's.
  const std::string deps = test::run_command("ninja -C " + build + " -t deps CMakeFiles/dspark_base.dir/src/tokenizer/regex.cpp.o").out;
  EXPECT_NE(deps.find(prefix + "/usr/include/pcre2.h"), std::string::npos) << deps;
}

// Without packages, a build or a GPU, the device run still ends with a summary that records every
// stage: the ones that failed, and the later ones as failed or skipped.
TEST(DeviceCheck, FailingStagesAreRecordedAndTheRestStillRun) {
  test::TempDir dir;
  const std::string out = dir.file("out");
  fs::create_directories(out);
  const test::CommandResult r = test::run_command(
      "OUT=" + out + " DSPARK_CARRY=" + dir.file("no-carry") + " DSPARK_CHECK_WORK=" + dir.file("work") +
      " DSPARK_CHECK_BUDGET_S=60 " + script("device_check.sh"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(test::read_text(fs::path(out) / "summary.json"));
  std::vector<std::string> names;
  for (const auto& s : summary["stages"]) names.push_back(s["stage"]);
  EXPECT_EQ(names, (std::vector<std::string>{"env", "deps", "configure", "build", "tests_cuda", "logits", "greedy_cli",
                                             "bench_forward", "profile", "serve", "monte_carlo"}));
  EXPECT_FALSE(summary["ok"].get<bool>());
  EXPECT_EQ(summary["stages"][1]["status"], "failed");  // no .deb files
  EXPECT_EQ(summary["stages"][3]["status"], "failed");  // nothing configured
  for (size_t i = 4; i < names.size(); ++i) EXPECT_EQ(summary["stages"][i]["status"], "skipped") << names[i];
  EXPECT_NE(test::read_text(fs::path(out) / "device_check.log").find("no .deb files"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(out) / "details.tar.gz"));
}

// hf_reference.py compare: equal files pass, a difference above the tolerance fails; same-ids
// tells equal generations from different ones.
TEST(DeviceCheck, ReferenceComparisonsCatchDifferences) {
  test::TempDir dir;
  const fs::path model = test::fixture("tiny-qwen3-tied");  // vocab 512
  std::vector<float> a(2 * 512), b;
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.01f;
  b = a;
  b[700] += 2e-4f;
  auto write = [&](const std::string& name, const std::vector<float>& v) {
    test::write_text(dir / name, std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  };
  write("a.f32", a);
  write("b.f32", b);
  auto compare = [&](const std::string& other, double tolerance) {
    return test::run_command("python3 " + script("hf_reference.py") + " compare --a " + dir.file("a.f32") + " --b " +
                             dir.file(other) + " --model " + model.string() + " --tolerance " +
                             std::to_string(tolerance) + " --label t --out " + dir.file("r.json"));
  };
  EXPECT_EQ(compare("a.f32", 1e-6).exit_code, 0);
  EXPECT_EQ(compare("b.f32", 1e-3).exit_code, 0);
  EXPECT_EQ(compare("b.f32", 1e-4).exit_code, 1);
  const auto result = nlohmann::json::parse(test::read_text(dir / "r.json"));
  EXPECT_NEAR(result["max_abs_diff"].get<double>(), 2e-4, 1e-6);
  EXPECT_EQ(result["rows"], 2);

  auto same = [&](const std::string& x, const std::string& y) {
    return test::run_command("python3 " + script("hf_reference.py") + " same-ids --a '" + x + "' --b '" + y +
                             "' --label t --out " + dir.file("s.json")).exit_code;
  };
  EXPECT_EQ(same(R"({"ids": [1, 2, 3]})", R"({"ids": [1, 2, 3], "text": "x"})"), 0);
  EXPECT_EQ(same(R"({"ids": [1, 2, 3]})", R"({"ids": [1, 2, 4]})"), 1);
  EXPECT_EQ(same("", ""), 1);  // nothing generated is a failure too
}

}  // namespace
}  // namespace dspark
