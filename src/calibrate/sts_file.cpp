#include "calibrate/sts_file.h"

#include <cmath>

#include "common/error.h"
#include "common/json_file.h"

namespace dspark::calibrate {

void write_sts_file(const std::filesystem::path& drafter_dir, const StsFile& sts) {
  nlohmann::json positions = nlohmann::json::array();
  for (const StsPositionReport& r : sts.positions) {
    if (r.n == 0) continue;
    nlohmann::json position = {{"position", r.position + 1}, {"rounds", r.n}, {"acceptance", r.label_mean},
                               {"temperature", sts.temperatures.at(static_cast<size_t>(r.position))},
                               {"ece_before", r.ece_before}, {"ece_after", r.ece_after},
                               {"auc_before", r.auc_before}, {"auc_after", r.auc_after}};
    if (std::isfinite(r.auc_exact)) position["auc_exact"] = r.auc_exact;
    positions.push_back(position);
  }
  write_json_file(drafter_dir / kStsFile, {{"temperatures", sts.temperatures},
                                           {"rounds", sts.rounds},
                                           {"prompts", sts.prompts},
                                           {"source", sts.source},
                                           {"sampling_temperature", sts.sampling_temperature},
                                           {"gamma", sts.gamma},
                                           {"positions", positions}});
}

std::optional<std::vector<double>> read_sts_temperatures(const std::filesystem::path& drafter_dir) {
  const std::filesystem::path file = drafter_dir / kStsFile;
  if (!std::filesystem::exists(file)) return std::nullopt;
  const nlohmann::json j = read_json_file(file);
  std::vector<double> temperatures;
  try {
    temperatures = j.at("temperatures").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ": " + e.what());
  }
  for (double t : temperatures)
    if (!(t > 0) || !std::isfinite(t)) throw Error(file.string() + ": temperatures must be positive and finite");
  return temperatures;
}

}  // namespace dspark::calibrate
