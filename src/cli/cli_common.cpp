#include "cli/cli_common.h"

#include <filesystem>
#include <sstream>

#include "common/error.h"

#ifndef DSPARK_DEFAULT_MODEL_DIR
#define DSPARK_DEFAULT_MODEL_DIR ""
#endif

namespace dspark::cli {

std::vector<int64_t> parse_ids(const std::string& csv, const std::string& flag) {
  std::vector<int64_t> ids;
  std::stringstream stream(csv);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw Error(flag + ": '" + item + "' is not an integer token id");
    ids.push_back(value);
  }
  if (ids.empty()) throw Error(flag + ": no token ids given");
  return ids;
}

model::WeightDType parse_weight_dtype(const std::string& name) {
  if (name == "bf16") return model::WeightDType::kBF16;
  if (name == "f32") return model::WeightDType::kF32;
  throw Error("--dtype: expected bf16 or f32, got '" + name + "'");
}

std::string default_model_dir() {
  const std::filesystem::path dir(DSPARK_DEFAULT_MODEL_DIR);
  if (!dir.empty() && std::filesystem::exists(dir / "config.json")) return dir.string();
  throw Error("no default model found (expected " + dir.string() + "/config.json); pass --model DIR");
}

}  // namespace dspark::cli
