// The frozen target's features of each training conversation, kept on disk so that a drafter's
// epochs after the first skip the target's forward (DeepSpec caches them before training, deepspec-spec 4.4 step 3).
// On the 20-layer default target that forward is most of a training step: more anchors per
// conversation cost little beside it (docs/results.md, "Learning rate and anchors").
//
// The cache stores the tensors the online path computes, byte for byte (the same forward, the
// same autocast), so training with it gives the same weights as training without. A cache is
// tied to one target, one data file, one set of captured layers, one autocast setting and one
// device type (its fingerprint); opening it for another is an error naming the difference.
//
// Layout of DIR: fingerprint.json; features.bin (each conversation's features then its final
// hidden states, raw little-endian, appended as first computed); index.jsonl (one line per
// conversation, written after its bytes). A line cut by an interruption, and bytes past the last
// full line, are dropped on open, so an interrupted run resumes with what it finished.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/torch_pch.h"

namespace dspark::train {

// On the target's device as its forward returns them; `find` returns them on the CPU.
struct TargetFeatures {
  torch::Tensor features;      // [S, m d] the captured layers' outputs, concatenated
  torch::Tensor final_hidden;  // [S, d] after the final norm
};

class FeatureCache {
 public:
  // What the cached bytes depend on: the target's config and weight files (hashed), the data
  // file (hashed), the captured layers, bf16 autocast and the device type.
  static nlohmann::json fingerprint(const std::filesystem::path& target, const std::filesystem::path& data_file,
                                    const std::vector<int64_t>& capture_layers, bool bf16_autocast,
                                    const std::string& device_type);

  // Opens DIR (creating it if new). Throws dspark::Error if DIR holds a cache of another fingerprint.
  FeatureCache(std::filesystem::path dir, const nlohmann::json& fingerprint);

  // The stored features of conversation `id`, or nothing if it has not been computed yet.
  std::optional<TargetFeatures> find(const std::string& id);
  // Appends conversation `id`'s features (f32, bf16 or f16 tensors on any device).
  void put(const std::string& id, const TargetFeatures& f);
  size_t size() const { return index_.size(); }

 private:
  struct Entry {
    int64_t offset = 0, rows = 0, feature_cols = 0, hidden_cols = 0;
    torch::ScalarType dtype = torch::kFloat32, hidden_dtype = torch::kFloat32;
  };
  void recover();

  std::filesystem::path dir_;
  std::unordered_map<std::string, Entry> index_;
  int64_t end_ = 0;  // bytes of features.bin that the index covers
  std::ofstream data_out_, index_out_;
  std::ifstream data_in_;
};

}  // namespace dspark::train
