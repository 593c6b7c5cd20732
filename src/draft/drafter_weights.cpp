#include "draft/drafter_weights.h"

#include "common/error.h"

namespace dspark::draft {

model::Linear WeightSource::linear(const std::string& name, const std::vector<int64_t>& shape) const {
  model::Linear l{matrix(name, shape), {}};
  prepare_linear(l, name);
  return l;
}

model::Linear WeightSource::lm_head_linear() const {
  model::Linear l{lm_head(), {}};
  prepare_linear(l, "lm_head.weight");
  return l;
}

torch::Tensor shared_or_stored(const model::SafetensorsArchive& archive, const std::string& name,
                               const torch::Tensor& target_tensor, const std::string& dir,
                               double quantized_target_tolerance) {
  if (!archive.contains(name)) return target_tensor;
  const model::TensorView& view = archive.get(name);
  const torch::ScalarType stored_dtype = model::to_scalar_type(view.dtype);
  const torch::Tensor stored = model::read_tensor(archive, name, {target_tensor.size(0), target_tensor.size(1)}, stored_dtype);
  const torch::Tensor target_cpu = target_tensor.to(torch::kCPU);
  if (target_cpu.scalar_type() == stored_dtype && torch::equal(stored, target_cpu)) return target_tensor;
  // The target's rounded to the stored dtype (DeepSpec's bf16 copy of an f32 or f16 target), or the
  // stored one rounded to the target's (a target converted on load, e.g. --dtype f16 on a bf16 one).
  if (torch::equal(stored, target_cpu.to(stored_dtype)) || torch::equal(stored.to(target_cpu.scalar_type()), target_cpu))
    return stored.to(target_tensor.device());
  // A quantized target's tensor (dequantized here) is the stored one up to the format's rounding:
  // relative RMS about 0.4% for Q8_0 and 10% for Q4_0, where another target's is ~140%.
  if (quantized_target_tolerance > 0) {
    const torch::Tensor s = stored.to(torch::kFloat32), t = target_cpu.to(torch::kFloat32);
    if (torch::sqrt((s - t).pow(2).sum() / s.pow(2).sum()).item<double>() < quantized_target_tolerance)
      return stored.to(target_tensor.device());
  }
  throw Error(dir + ": " + name + " differs from the target's (this drafter was trained for another target)");
}

DrafterWeights::DrafterWeights(const std::string& dir, const model::Transformer& target, model::WeightDType weight_dtype,
                               kernels::Bf16Math bf16_math)
    : dir_(dir),
      target_(target),
      archive_(model::SafetensorsArchive::open(dir)),
      matrix_dtype_(model::weight_scalar_type(
          weight_dtype == model::WeightDType::kAuto || model::is_quantized(weight_dtype) ? model::stored_weight_dtype(archive_)
                                                                                        : weight_dtype)),
      bf16_math_(bf16_math) {
  if (!model::is_quantized(weight_dtype)) return;
  if (!target.device().is_cpu())
    throw Error(std::string("a ") + model::weight_dtype_name(weight_dtype) + " drafter runs on the CPU only, not on " +
                target.device().str());
  quantized_ = weight_dtype == model::WeightDType::kQ8_0 ? kernels::QuantType::kQ8_0 : kernels::QuantType::kQ4_0;
}

void DrafterWeights::prepare_linear(model::Linear& linear, const std::string& name) const {
  linear.bf16_math = bf16_math_;
  // A matrix whose rows are not whole blocks of 32 (a Markov head's W2 at a rank like 12) keeps
  // the checkpoint's precision, as llama.cpp's quantizer leaves such tensors unquantized.
  if (quantized_ && linear.n_in() % kernels::kQuantBlock == 0) linear.quantize(*quantized_, dir_ + ": " + name);
}

namespace {

double quantized_tolerance(const model::Transformer& target) {
  switch (target.weight_dtype()) {
    case model::WeightDType::kQ8_0: return 0.02;
    case model::WeightDType::kQ4_0: return 0.25;
    default: return 0;
  }
}

}  // namespace

torch::Tensor DrafterWeights::matrix(const std::string& name, const std::vector<int64_t>& shape) const {
  return model::read_tensor(archive_, name, shape, matrix_dtype_).to(target_.device());
}

torch::Tensor DrafterWeights::vector(const std::string& name, const std::vector<int64_t>& shape) const {
  return model::read_tensor(archive_, name, shape, torch::kFloat32).to(target_.device());
}

model::DecoderLayer DrafterWeights::layer(const std::string& prefix, const model::ModelConfig& config,
                                          int64_t attention_input) const {
  model::DecoderLayer layer = model::load_decoder_layer(archive_, prefix, config, matrix_dtype_, target_.device(), attention_input);
  for (auto [linear, name] : {std::pair{&layer.qkv, "self_attn.qkv_proj"}, {&layer.o_proj, "self_attn.o_proj"},
                              {&layer.gate_up, "mlp.gate_up_proj"}, {&layer.down, "mlp.down_proj"}})
    prepare_linear(*linear, prefix + name);
  return layer;
}

torch::Tensor DrafterWeights::embed() const {
  return shared_or_stored(archive_, "embed_tokens.weight", target_.embedding(), dir_, quantized_tolerance(target_));
}

torch::Tensor DrafterWeights::lm_head() const {
  // In the drafter's matrix dtype like its other matrices: DeepSpec's bf16 copy stays bf16 at
  // auto, and an f32 drafter (--draft-dtype f32) takes f32 products through its LM head too.
  return shared_or_stored(archive_, "lm_head.weight", target_.lm_head_weight(), dir_, quantized_tolerance(target_))
      .to(matrix_dtype_);
}

}  // namespace dspark::draft
