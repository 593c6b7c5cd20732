// Pretraining the target model: next-token cross-entropy on the trained tokens of the packed
// corpus stream, with the engine's own Transformer (one model implementation for training and
// inference), AdamW, warmup + cosine, gradient clipping, periodic per-domain validation loss and
// checkpoints that resume bit for bit.
//
// Run directory layout:
//   <out>/checkpoints/step-<N>/  model.safetensors (f32) + config.json, optimizer.safetensors,
//                                trainer_state.json (step, options, last losses)
//   <out>/model/                 the final model in Hugging Face layout (bf16), with tokenizer
//                                files and generation_config.json: ready for `dspark generate`
//   <out>/log.jsonl              one line per logged step and per validation
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "model/transformer.h"

namespace dspark::train {

struct TargetTrainOptions {
  std::filesystem::path model_config;  // config.json of the architecture (vocab must match the tokenizer)
  std::filesystem::path corpus_dir;    // from `dspark data corpus`
  std::filesystem::path tokenizer_dir; // from `dspark train tokenizer`
  std::filesystem::path out_dir;
  int64_t seq_len = 512;
  int64_t batch_size = 16;     // windows per step
  double epochs = 1.0;         // sets the step count unless max_steps > 0
  int64_t max_steps = 0;       // stop after this many steps (the schedule still spans `epochs`)
  double peak_lr = 2e-3;
  double min_lr = 2e-4;
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  uint64_t seed = 0;           // initial weights and data order
  // A trained smaller model to start from instead of random weights: it is grown into
  // model_config's shape computing the same function (model/model_grow.h).
  std::filesystem::path grow_from;
  int64_t save_every = 100;    // steps between checkpoints (and at the end)
  int64_t eval_every = 200;    // steps between validations (and at the end)
  int64_t eval_windows = 16;   // validation windows per domain
  int64_t keep_checkpoints = 2;
  bool resume = true;          // continue from the newest checkpoint in out_dir if there is one
  // Run the matrix products of forward and backward in bf16 (CPU autocast); weights, optimizer
  // state, norms and the loss stay f32. Pays where the CPU has bf16 dot products (AVX512-BF16, AMX).
  bool bf16_autocast = false;
};

struct TargetTrainResult {
  int64_t steps = 0;           // total steps done (including those before a resume)
  double last_loss = NAN;      // training loss of the last step this invocation ran (NaN: none ran,
                               // e.g. a rerun of a finished run; printed as null)
  std::map<std::string, double> valid_loss;  // per domain, at the end
  double seconds = 0;          // wall time of this invocation
  std::filesystem::path final_model_dir;
};

TargetTrainResult train_target(const TargetTrainOptions& options);

// Mean next-token loss per domain over the first `max_windows` windows of each validation stream
// (all of them if max_windows <= 0). model_dir is any model directory (checkpoint or final) or a
// GGUF file; tokenizer_dir a directory with tokenizer.json or a GGUF file.
std::map<std::string, double> evaluate_target(const std::filesystem::path& model_dir,
                                              const std::filesystem::path& corpus_dir,
                                              const std::filesystem::path& tokenizer_dir, int64_t seq_len,
                                              int64_t max_windows,
                                              model::WeightDType weight_dtype = model::WeightDType::kF32);

}  // namespace dspark::train
