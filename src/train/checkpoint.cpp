#include "train/checkpoint.h"

#include "common/json_file.h"

#include <algorithm>
#include <cstdio>
#include <regex>

#include "common/error.h"
#include "model/safetensors.h"

namespace dspark::train {

namespace fs = std::filesystem;

std::string checkpoint_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06ld", static_cast<long>(step));
  return buf;
}

nlohmann::json read_trainer_state(const fs::path& checkpoint) {
  const fs::path file = checkpoint / "trainer_state.json";
  const nlohmann::json state = read_json_file(file);
  if (!state.is_object() || !state.contains("step") || !state["step"].is_number_integer() || !state.contains("schedule"))
    throw Error(file.string() + ": not a trainer state (an object with an integer \"step\" and the run's \"schedule\")");
  return state;
}

fs::path newest_checkpoint(const fs::path& out_dir, int64_t& step) {
  fs::path best;
  step = -1;
  const fs::path dir = out_dir / "checkpoints";
  if (!fs::exists(dir)) return best;
  const std::regex pattern("step-([0-9]+)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern) || !fs::exists(entry.path() / "trainer_state.json")) continue;
    const int64_t s = std::stoll(m[1]);
    if (s > step) {
      step = s;
      best = entry.path();
    }
  }
  return best;
}

int64_t end_step_after_resume(int64_t start_step, int64_t end_step) {
  if (start_step < end_step) return end_step;
  std::fprintf(stderr, "the checkpoint is at step %ld, at or past this run's last step %ld: nothing to train\n",
               static_cast<long>(start_step), static_cast<long>(end_step));
  return start_step;
}

void save_checkpoint(const fs::path& out_dir, int64_t step, int64_t keep,
                     const std::function<void(const fs::path&)>& fill) {
  const fs::path dir = out_dir / "checkpoints" / checkpoint_name(step);
  const fs::path tmp = dir.string() + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  fill(tmp);
  fs::remove_all(dir);
  fs::rename(tmp, dir);
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(out_dir / "checkpoints"))
    if (fs::exists(e.path() / "trainer_state.json")) all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + static_cast<size_t>(std::max<int64_t>(1, keep)) < all.size(); ++i) fs::remove_all(all[i]);
}

void write_named_tensors(const fs::path& file, const NamedTensors& tensors) {
  std::vector<torch::Tensor> keep;
  std::vector<model::TensorToWrite> to_write;
  for (const auto& [name, t] : tensors) {
    torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    to_write.push_back({name, model::DType::kF32, std::vector<int64_t>(c.sizes().begin(), c.sizes().end()),
                        c.data_ptr(), static_cast<size_t>(c.numel() * 4)});
    keep.push_back(c);
  }
  model::write_safetensors(file.string(), to_write);
}

NamedTensors read_named_tensors(const fs::path& file) {
  const model::SafetensorsArchive archive = model::SafetensorsArchive::open(file.string());
  NamedTensors out;
  for (const std::string& name : archive.names()) {
    const model::TensorView& v = archive.get(name);
    if (v.dtype != model::DType::kF32) throw Error(file.string() + ": tensor " + name + " is not F32");
    out.emplace_back(name, torch::from_blob(const_cast<void*>(v.data), v.shape, torch::kFloat32).clone());
  }
  return out;
}

}  // namespace dspark::train
