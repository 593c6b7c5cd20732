// sts.json, the file that carries a DSpark drafter's STS temperatures: written beside the drafter's
// weights by `dspark calibrate`, read by the drafter when it loads. This module is the only code
// that knows its layout:
//   { "temperatures": [T_1, ..., T_g],          one per draft position (what the drafter applies)
//     "rounds": N, "prompts": N, "source": "...", "sampling_temperature": T, "gamma": g,
//     "positions": [{"position", "rounds", "acceptance", "temperature", "ece_before", "ece_after",
//                    "auc_before", "auc_after"}, ...] }   the calibration report, for people
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/sts.h"

namespace dspark::calibrate {

inline constexpr const char* kStsFile = "sts.json";

struct StsFile {
  std::vector<double> temperatures;            // [positions]
  int64_t rounds = 0, prompts = 0;             // what they were fitted on
  std::string source;                          // the prompts' file name (not a machine path)
  double sampling_temperature = 0;             // of the rollouts
  int64_t gamma = 0;
  std::vector<StsPositionReport> positions;    // positions with no rounds are left out
};

// Writes drafter_dir/sts.json; throws dspark::Error naming the file.
void write_sts_file(const std::filesystem::path& drafter_dir, const StsFile& sts);
// The temperatures of drafter_dir/sts.json; nullopt when there is none. Throws dspark::Error naming
// the file when it is not valid or a temperature is not positive and finite.
std::optional<std::vector<double>> read_sts_temperatures(const std::filesystem::path& drafter_dir);

}  // namespace dspark::calibrate
