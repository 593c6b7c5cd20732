// Helpers shared by the tests: fixture paths, temporary directories, running the dspark binary.
#pragma once
#include <unistd.h>
#include <sys/wait.h>

#include <array>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dspark::test {

// The shared fixtures and data: $DSPARK_SHARED_DIR when set (the device check carries a copy), else
// the folder beside the checkout.
inline std::filesystem::path shared_dir() {
  const char* dir = std::getenv("DSPARK_SHARED_DIR");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::path(DSPARK_SHARED_DIR);
}
inline std::filesystem::path fixture(const std::string& name) { return shared_dir() / "fixtures" / name; }

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("dspark-test-" + std::to_string(getpid()) + "-" +
                                                      std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::error_code ec; std::filesystem::remove_all(path_, ec); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Sets an environment variable for the object's life (the dspark processes a test starts inherit
// it), then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) saved_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { saved_ ? setenv(name_, saved_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::vector<float> read_f32(const std::filesystem::path& path) {
  const std::string bytes = read_text(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// The device the model-based tests run on: $DSPARK_TEST_DEVICE ("cpu", "cuda", "cuda:N"), default
// "cpu". tests/test_device.cpp makes it the models' default device before any test runs, and
// run_dspark passes it to the CLI as --device.
inline std::string test_device_name() {
  const char* name = std::getenv("DSPARK_TEST_DEVICE");
  return name != nullptr && *name != '\0' ? name : "cpu";
}

struct CommandResult {
  int exit_code = -1;       // -1 when killed by a signal (a crash)
  std::string out, err;
};

// Runs a shell command line, capturing stdout and stderr.
inline CommandResult run_command(const std::string& command_line) {
  TempDir dir;
  // Appended piece by piece: GCC 12 warns (-Wstringop-overflow, a false positive) on the chain of
  // operator+ that builds the same string.
  std::string cmd = command_line;
  cmd.append(" > ").append((dir / "out").string()).append(" 2> ").append((dir / "err").string());
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(dir / "out");
  r.err = read_text(dir / "err");
  return r;
}

// Runs `dspark <args>` (with --device when DSPARK_TEST_DEVICE names one).
inline CommandResult run_dspark(const std::string& args) {
  std::string cmd = DSPARK_BINARY;
  if (test_device_name() != "cpu") cmd.append(" --device ").append(test_device_name());
  return run_command(cmd.append(" ").append(args));
}

}  // namespace dspark::test
