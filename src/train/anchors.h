// Anchor sampling for block-parallel drafter training (deepspec-spec 4.3). A block is
// [anchor token, mask, ..., mask] at positions a..a+B-1, predicting tokens a+1..a+B.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/rng.h"

namespace dspark::train {

// Up to `max_anchors` positions i in [0, S-2] with loss_mask[i] and loss_mask[i+1] (the anchor is
// itself an answer token, so the first answer token is never a label), drawn uniformly without
// replacement, ascending. All candidates when there are fewer.
std::vector<int64_t> sample_anchors(std::span<const uint8_t> loss_mask, int64_t max_anchors, sampling::Rng& rng);

// Validity of each (block, slot) label: m[b, k] = prod_{j<=k} [a_b+j+1 < S and loss_mask[a_b+j+1]],
// so supervision stops at the first label outside an answer or past the end. [n * block] row-major.
std::vector<float> block_label_mask(std::span<const int64_t> anchors, std::span<const uint8_t> loss_mask,
                                    int64_t block_size);

}  // namespace dspark::train
