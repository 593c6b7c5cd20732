// Training checkpoints shared by the trainers: <out>/checkpoints/step-NNNNNN/ directories, each
// written under a .tmp name and renamed into place when complete (so a crash never leaves a
// half-written checkpoint that looks finished), with the newest few kept.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace dspark::train {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// "step-000123"
std::string checkpoint_name(int64_t step);

// A checkpoint's trainer_state.json: an object with an integer "step" and the "schedule" the run
// was made with; dspark::Error naming the file otherwise.
nlohmann::json read_trainer_state(const std::filesystem::path& checkpoint);

// Newest complete checkpoint under out_dir/checkpoints (one holding trainer_state.json) and its
// step, or an empty path and step -1.
std::filesystem::path newest_checkpoint(const std::filesystem::path& out_dir, int64_t& step);

// The step a run ends at: `end_step` (the schedule's, or --max-steps), or the resumed checkpoint's
// step when that is already past it, saying so: the run then trains nothing rather than counting
// its progress as "24/22".
int64_t end_step_after_resume(int64_t start_step, int64_t end_step);

// Writes out_dir/checkpoints/step-N: `fill(tmp_dir)` writes the files, then the directory is
// renamed into place and all but the newest `keep` checkpoints are removed.
void save_checkpoint(const std::filesystem::path& out_dir, int64_t step, int64_t keep,
                     const std::function<void(const std::filesystem::path&)>& fill);

// F32 safetensors of named tensors (optimizer state, trainable weights) and back.
void write_named_tensors(const std::filesystem::path& file, const NamedTensors& tensors);
NamedTensors read_named_tensors(const std::filesystem::path& file);

}  // namespace dspark::train
