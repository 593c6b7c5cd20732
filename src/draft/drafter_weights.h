// Where a drafter network's weights come from, by DeepSpec name: a checkpoint directory for
// drafting (DrafterWeights) or the trainable parameters for training (train::DrafterTrainModel).
// The networks (dspark_network.h, eagle3_layer.h) name their tensors once, against this interface.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/safetensors.h"
#include "model/transformer.h"

namespace dspark::draft {

struct DrafterLoadOptions {
  int64_t max_slots = 1;
  int64_t capacity = 4096;  // positions per slot (prompt + generated)
  model::WeightDType weight_dtype = model::WeightDType::kAuto;  // kAuto: the drafter checkpoint's
  // Run the drafter's network through libtorch ops even on the CPU (where the rows kernels are the
  // default): tests compare the two executions of one network. A target on its tensor-ops path
  // (model::Kernels::kTensorOps, the code a GPU runs) takes its drafters there too.
  bool force_tensor_ops = false;
  // How the network's bf16 matrices multiply on the CPU (kernels::Bf16Math). A drafter's numerics
  // only shape its proposals, and verification keeps the output exact whatever they are, so it
  // takes bf16 dot products (activations rounded to bf16 as in bf16 training; about a quarter off
  // a drafting call). kExact reproduces an f32 reference to rounding (the conformance tests).
  kernels::Bf16Math bf16_math = kernels::Bf16Math::kDotBf16;
};
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // A weight matrix of that shape (drafting: the load dtype; training: an f32 parameter).
  virtual torch::Tensor matrix(const std::string& name, const std::vector<int64_t>& shape) const = 0;
  // A norm weight, bias or head vector, f32.
  virtual torch::Tensor vector(const std::string& name, const std::vector<int64_t>& shape) const = 0;
  // The decoder layer under `prefix` (fused q/k/v and gate/up); attention_input as in
  // model::load_decoder_layer (0: hidden_size).
  virtual model::DecoderLayer layer(const std::string& prefix, const model::ModelConfig& config,
                                    int64_t attention_input = 0) const = 0;
  // The embedding and LM head [vocab, hidden]: the target's (frozen in training), or a drafter's
  // stored copies of them (shared_or_stored).
  virtual torch::Tensor embed() const = 0;
  virtual torch::Tensor lm_head() const = 0;
  // The bf16 math the network's Linear layers run with (DrafterLoadOptions::bf16_math).
  virtual kernels::Bf16Math bf16_math() const { return kernels::Bf16Math::kExact; }
  // Readies a Linear of the network (`name`: its tensor, for messages): its bf16 math, and for a
  // drafter loaded as q8_0 / q4_0 its blocks. layer() and the two builders below pass every
  // Linear they return through it.
  virtual void prepare_linear(model::Linear& linear, const std::string& /*name*/) const { linear.bf16_math = bf16_math(); }

  // matrix(name, shape) as a Linear without bias, and the LM head as one.
  model::Linear linear(const std::string& name, const std::vector<int64_t>& shape) const;
  model::Linear lm_head_linear() const;
};

// The embedding / LM head a drafter uses. DeepSpec stores frozen bf16 copies of the target's
// (deepspec-spec 1.5). When `name` is absent, or equals the target's tensor bit for bit, the
// target's tensor is shared. When it equals the target's rounded to the stored dtype (an f32 or
// f16 target), or the target's is the stored one rounded to the target's dtype (a target converted
// on load), the stored copy is used, as DeepSpec does. Anything else means the drafter was trained for another
// target: dspark::Error. With a quantized target (its tensor dequantized), the stored copy is used
// when it differs from the target's by less than quantized_target_tolerance (relative RMS).
torch::Tensor shared_or_stored(const model::SafetensorsArchive& archive, const std::string& name,
                               const torch::Tensor& target_tensor, const std::string& dir,
                               double quantized_target_tolerance = 0);

// A drafter checkpoint directory (DeepSpec layout), read in the dtype and on the device the
// drafter runs with: matrices in the load options' dtype (kAuto: the checkpoint's, as
// model::stored_weight_dtype resolves it; q8_0 / q4_0: the network's Linear layers, its LM head
// included, quantized from the checkpoint's values where their rows are whole blocks, CPU only),
// vectors in f32.
class DrafterWeights : public WeightSource {
 public:
  DrafterWeights(const std::string& dir, const model::Transformer& target, model::WeightDType weight_dtype,
                 kernels::Bf16Math bf16_math);
  torch::Tensor matrix(const std::string& name, const std::vector<int64_t>& shape) const override;
  torch::Tensor vector(const std::string& name, const std::vector<int64_t>& shape) const override;
  model::DecoderLayer layer(const std::string& prefix, const model::ModelConfig& config,
                            int64_t attention_input = 0) const override;
  torch::Tensor embed() const override;
  torch::Tensor lm_head() const override;
  kernels::Bf16Math bf16_math() const override { return bf16_math_; }
  void prepare_linear(model::Linear& linear, const std::string& name) const override;

 private:
  std::string dir_;
  const model::Transformer& target_;
  model::SafetensorsArchive archive_;
  torch::ScalarType matrix_dtype_;               // as read from the checkpoint (before quantizing)
  std::optional<kernels::QuantType> quantized_;  // the network's matrices in these blocks
  kernels::Bf16Math bf16_math_;
};

}  // namespace dspark::draft
