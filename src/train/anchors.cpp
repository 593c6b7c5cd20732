#include "train/anchors.h"

#include <algorithm>

namespace dspark::train {

std::vector<int64_t> sample_anchors(std::span<const uint8_t> loss_mask, int64_t max_anchors, sampling::Rng& rng) {
  std::vector<int64_t> candidates;
  for (size_t i = 0; i + 1 < loss_mask.size(); ++i)
    if (loss_mask[i] && loss_mask[i + 1]) candidates.push_back(static_cast<int64_t>(i));
  const int64_t n = std::min<int64_t>(max_anchors, static_cast<int64_t>(candidates.size()));
  // Partial Fisher-Yates: the first n entries become a uniform sample without replacement.
  for (int64_t i = 0; i < n; ++i) {
    const int64_t remaining = static_cast<int64_t>(candidates.size()) - i;
    const int64_t j = i + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(remaining));
    std::swap(candidates[i], candidates[j]);
  }
  candidates.resize(n);
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

std::vector<float> block_label_mask(std::span<const int64_t> anchors, std::span<const uint8_t> loss_mask,
                                    int64_t block_size) {
  const int64_t S = static_cast<int64_t>(loss_mask.size());
  std::vector<float> mask(anchors.size() * block_size, 0.0f);
  for (size_t b = 0; b < anchors.size(); ++b) {
    for (int64_t k = 0; k < block_size; ++k) {
      const int64_t label = anchors[b] + k + 1;
      if (label >= S || !loss_mask[label]) break;
      mask[b * block_size + k] = 1.0f;
    }
  }
  return mask;
}

}  // namespace dspark::train
