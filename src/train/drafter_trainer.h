// `dspark train drafter` for DSpark, DFlash and EAGLE-3 (deepspec-spec 3.1-3.2, 4.1-4.3): the
// target is frozen and computes its features per sequence, or reads them back from a feature cache
// after a conversation's first epoch (train/feature_cache.h, docs/training.md); each step samples
// anchors in a batch of regenerated conversations, runs all blocks of a sequence in one pass (for
// EAGLE-3: the training-time test unrolled from the row before each anchor), and minimises DeepSpec's
// loss with AdamW (betas 0.9 / 0.999, no weight decay), linear warmup over 4% of the steps then
// cosine to 0, and gradient clipping at 1.
//
// Run directory layout (as `train target`):
//   <out>/checkpoints/step-<N>/  model.safetensors (trainable tensors, f32), config.json,
//                                optimizer.safetensors, trainer_state.json
//   <out>/model/                 the drafter in DeepSpec's layout (bf16): loads with --draft
//   <out>/log.jsonl              losses per logged step, validation metrics
// With a feature cache the target's forward runs once per conversation (its first epoch); the
// later ones read its features back, and train to the same bytes.
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "draft/draft_init.h"

namespace dspark::train {

struct DrafterTrainOptions {
  std::filesystem::path target_dir;
  std::filesystem::path data_file;   // regenerated.jsonl from `dspark data regenerate`
  std::filesystem::path out_dir;
  draft::DrafterInitOptions init;    // method, depth, block size, Markov rank, seed of the initial weights
  double epochs = 1.0;
  int64_t max_steps = 0;             // stop early (the schedule still spans `epochs`)
  int64_t batch_size = 8;            // sequences per step
  int64_t max_anchors = 64;          // blocks per sequence (DeepSpec: 512 per 4096 tokens)
  double peak_lr = 6e-4;
  double warmup_ratio = 0.04;
  double grad_clip = 1.0;
  uint64_t seed = 42;                // data order and anchors
  int64_t min_loss_tokens = 14;      // shorter answers are dropped, as DeepSpec does
  int64_t valid_percent = 2;         // conversations held out (by a hash of their id)
  int64_t valid_sequences = 64;      // of them, used per validation
  int64_t save_every = 50;
  int64_t eval_every = 100;
  int64_t keep_checkpoints = 2;
  bool resume = true;
  bool bf16_autocast = false;        // matrix products in bf16 (train/bf16_autocast.h)
  std::filesystem::path feature_cache_dir;  // the target's features kept here (train/feature_cache.h); empty: none
};

struct DrafterValidation {
  // NaN (null in JSON) when nothing was validated: no held-out conversation, or none with a block.
  double loss = NAN, tau = NAN;      // tau_probabilistic (bonus included)
  std::vector<double> accept_rate;   // per slot: mean c* = 1 - TV
};

struct DrafterTrainResult {
  int64_t steps = 0;
  double seconds = 0;
  DrafterValidation valid;
  std::filesystem::path final_dir;
};

DrafterTrainResult train_drafter(const DrafterTrainOptions& options);

}  // namespace dspark::train
