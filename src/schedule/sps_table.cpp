#include "schedule/sps_table.h"

#include <cmath>
#include <utility>

#include "common/error.h"
#include "common/json_file.h"
#include "common/one_line_error.h"

namespace dspark::schedule {

namespace {

constexpr const char* kFormat = "dspark-sps-table";
constexpr int64_t kVersion = 1;

void check_values(const std::vector<double>& sps, const std::string& source) {
  if (sps.empty()) fail_one_line(source, "SPS table has no entries (need SPS(1) at least)");
  for (size_t i = 0; i < sps.size(); ++i)
    if (!std::isfinite(sps[i]) || !(sps[i] > 0.0))
      fail_one_line(source, "SPS(" + std::to_string(i + 1) + ") = " + std::to_string(sps[i]) +
                                ", expected a finite steps/second > 0");
}

std::string get_string(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_string()) fail_one_line(source, std::string("missing or non-string \"") + key + "\"");
  std::string value = j[key].get<std::string>();
  if (value.empty()) fail_one_line(source, std::string("empty \"") + key + "\"");
  return value;
}

void check_header(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail_one_line(source, "SPS table is not a JSON object");
  if (get_string(j, "format", source) != kFormat)
    fail_one_line(source, std::string("\"format\" is not \"") + kFormat + "\"");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion)
    fail_one_line(source, "missing or unsupported \"version\" (expected " + std::to_string(kVersion) + ")");
}

std::vector<double> get_values(const nlohmann::json& j, const std::string& source) {
  if (!j.contains("steps_per_second") || !j["steps_per_second"].is_array())
    fail_one_line(source, "missing or non-array \"steps_per_second\"");
  std::vector<double> sps;
  for (const auto& v : j["steps_per_second"]) {
    if (!v.is_number())
      fail_one_line(source, "SPS(" + std::to_string(sps.size() + 1) + ") is not a number");
    sps.push_back(v.get<double>());
  }
  check_values(sps, source);
  return sps;
}

char file_safe(char c) {
  const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-';
  return ok ? c : '_';
}

std::string file_safe(std::string s) {
  for (char& c : s) c = file_safe(c);
  return s;
}

}  // namespace

bool SpsMeta::same_setup(const SpsMeta& other) const {
  return model_id == other.model_id && machine_id == other.machine_id && device == other.device &&
         dtype == other.dtype && build_id == other.build_id;
}

SpsTable::SpsTable(std::vector<double> steps_per_second, SpsMeta meta)
    : sps_(std::move(steps_per_second)), meta_(std::move(meta)) {
  check_values(sps_, "SpsTable");
}

double SpsTable::sps(int64_t n_tokens) const {
  if (!covers(n_tokens))
    throw Error("SPS table measured B = 1.." + std::to_string(max_tokens()) + "; B = " + std::to_string(n_tokens) +
                " is outside it (the table's largest B is the step's token budget)");
  return sps_[static_cast<size_t>(n_tokens - 1)];
}

nlohmann::json SpsTable::to_json() const {
  return {{"format", kFormat},
          {"version", kVersion},
          {"model_id", meta_.model_id},
          {"machine_id", meta_.machine_id},
          {"device", meta_.device},
          {"dtype", meta_.dtype},
          {"measured_date", meta_.measured_date},
          {"build_id", meta_.build_id},
          {"steps_per_second", sps_}};
}

SpsTable SpsTable::from_json(const nlohmann::json& j, const std::string& source) {
  check_header(j, source);
  SpsMeta meta{get_string(j, "model_id", source), get_string(j, "machine_id", source),
               get_string(j, "device", source), get_string(j, "dtype", source),
               get_string(j, "measured_date", source), j.value("build_id", std::string())};
  return SpsTable(get_values(j, source), std::move(meta));
}

SpsTable SpsTable::load(const std::filesystem::path& path) { return from_json(read_json_file(path), path.string()); }

void SpsTable::save(const std::filesystem::path& path) const { write_json_file(path, to_json()); }

std::string cache_file_name(const SpsMeta& meta) {
  return "sps-" + file_safe(meta.model_id) + "--" + file_safe(meta.machine_id) + "--" + file_safe(meta.device) +
         "--" + file_safe(meta.dtype) + ".json";
}

double throughput(double expected_tokens, int64_t n_tokens, const SpsTable& table) {
  return expected_tokens * table.sps(n_tokens);
}

}  // namespace dspark::schedule
