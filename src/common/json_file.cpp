#include "common/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/one_line_error.h"

namespace dspark {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_one_line(path.string(), std::string("cannot open (") + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail_one_line(path.string(), "read error");
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail_one_line(path.string(), "not valid JSON: " + json_error_reason(e));
  }
}

void write_json_file(const std::filesystem::path& path, const nlohmann::json& json) {
  std::ofstream out(path);
  if (!out) fail_one_line(path.string(), std::string("cannot open for writing (") + std::strerror(errno) + ")");
  // A full disk shows only when the buffer is flushed: check it here so a result is never lost silently.
  if (!(out << json.dump(2) << "\n" << std::flush)) fail_one_line(path.string(), "write failed");
}

}  // namespace dspark
