// Small helpers shared by the subcommands: parsing flag values and locating models.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dspark::cli {

// "1,2,3" -> {1, 2, 3}; throws dspark::Error naming the bad element.
std::vector<int64_t> parse_ids(const std::string& csv, const std::string& flag);
// "bf16" | "f32" -> weight dtype; throws otherwise.
model::WeightDType parse_weight_dtype(const std::string& name);
// The shipped default model (models/default in the source tree), or an error saying to pass --model.
std::string default_model_dir();

}  // namespace dspark::cli
