#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_file.h"
#include "common/process_memory.h"
#include "model/kernels/attention_small.h"
#include "model/kernels/bf16.h"
#include "model/kernels/row_ops.h"
#include "model/blas_check.h"
#include "model/gguf.h"
#include "model/gguf_loader.h"
#include "model/huge_pages.h"
#include "model/safetensors.h"

namespace dspark::model {

torch::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return torch::kFloat32;
    case DType::kF16: return torch::kFloat16;
    case DType::kBF16: return torch::kBFloat16;
  }
  DSPARK_ASSERT(false);
}

namespace {

WeightDType weight_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return WeightDType::kF32;
    case DType::kF16: return WeightDType::kF16;
    case DType::kBF16: return WeightDType::kBF16;
  }
  DSPARK_ASSERT(false);
}

DType safetensors_dtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return DType::kF32;
    case torch::kFloat16: return DType::kF16;
    case torch::kBFloat16: return DType::kBF16;
    default: DSPARK_ASSERT(false);
  }
}

// config.json's torch_dtype for a model saved with matrices in `dtype`.
const char* torch_dtype_name(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::kF16: return "float16";
    case WeightDType::kBF16: return "bfloat16";
    default: return "float32";
  }
}

// Checkpoint tensor `name` (checked against `shape`) as a tensor over the read-only mapping, in
// its stored dtype; valid while the archive lives.
torch::Tensor mapped_tensor(const SafetensorsArchive& archive, const std::string& name,
                            const std::vector<int64_t>& shape) {
  const TensorView& view = archive.get(name, shape);
  return torch::from_blob(const_cast<void*>(view.data), view.shape,
                          torch::TensorOptions().dtype(to_scalar_type(view.dtype)));
}

}  // namespace

const char* weight_dtype_name(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::kAuto: return "auto";
    case WeightDType::kF32: return "f32";
    case WeightDType::kF16: return "f16";
    case WeightDType::kBF16: return "bf16";
    case WeightDType::kQ8_0: return "q8_0";
    case WeightDType::kQ4_0: return "q4_0";
  }
  DSPARK_ASSERT(false);
}

torch::ScalarType weight_scalar_type(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::kF32:
    case WeightDType::kQ8_0:
    case WeightDType::kQ4_0: return torch::kFloat32;
    case WeightDType::kF16: return torch::kFloat16;
    case WeightDType::kBF16: return torch::kBFloat16;
    case WeightDType::kAuto: break;
  }
  DSPARK_ASSERT(false);
}

WeightDType common_weight_dtype(const std::vector<WeightDType>& dtypes) {
  if (dtypes.empty()) return WeightDType::kF32;
  for (WeightDType dtype : dtypes)
    if (dtype != dtypes.front()) return WeightDType::kF32;
  return dtypes.front();
}

WeightDType stored_weight_dtype(const SafetensorsArchive& archive) {
  std::vector<WeightDType> dtypes;
  for (const auto& [name, view] : archive.views())
    if (view.shape.size() == 2) dtypes.push_back(weight_dtype_of(view.dtype));
  return common_weight_dtype(dtypes);
}

torch::Tensor read_tensor(const SafetensorsArchive& archive, const std::string& name,
                          const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const torch::Tensor mapped = mapped_tensor(archive, name, shape);
  torch::Tensor tensor = empty_in_huge_pages(mapped.sizes().vec(), dtype);
  tensor.copy_(mapped);
  return tensor;
}

namespace {

struct RowPart {
  std::string name;
  int64_t rows;
};

// Checkpoint matrices [rows, cols] stacked by rows into one (q, k, v -> qkv), in huge pages like
// read_tensor's; each is copied from the mapping straight into its rows.
torch::Tensor read_stacked_rows(const SafetensorsArchive& archive, const std::vector<RowPart>& parts, int64_t cols,
                                torch::ScalarType dtype) {
  int64_t rows = 0;
  for (const RowPart& part : parts) rows += part.rows;
  torch::Tensor stacked = empty_in_huge_pages({rows, cols}, dtype);
  int64_t first = 0;
  for (const RowPart& part : parts) {
    stacked.narrow(0, first, part.rows).copy_(mapped_tensor(archive, part.name, {part.rows, cols}));
    first += part.rows;
  }
  return stacked;
}

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor inv_rms = torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return x * inv_rms * weight;
}

Transformer::Transformer(ModelConfig config, const LoadOptions& options)
    : config_(std::move(config)), device_(options.device), weight_dtype_(options.weight_dtype),
      kv_cache_dtype_(options.kv_cache_dtype), kernels_(options.kernels), rope_(config_) {}

Transformer Transformer::load(const std::string& dir, const LoadOptions& options) {
  warn_if_reference_blas();
  std::optional<GgufFile> gguf;
  if (is_gguf_path(dir)) gguf.emplace(GgufFile::open(dir));
  Transformer model(gguf ? gguf_model_config(*gguf) : ModelConfig::load(dir), options);
  if (gguf) model.load_gguf_weights(*gguf);
  else model.load_weights(dir);
  gguf.reset();  // the file's mapping
  if (is_quantized(model.weight_dtype())) model.quantize_weights();
  model.place_weights();
  release_free_heap();  // the conversion buffers: resident after load is the weights
  return model;
}

bool is_quantized(WeightDType dtype) { return dtype == WeightDType::kQ8_0 || dtype == WeightDType::kQ4_0; }

// The matrices not already in blocks (a GGUF file's of the requested type) were read in f32; each
// becomes llama.cpp's blocks of the requested type, as llama.cpp's quantizer would write them.
void Transformer::quantize_weights() {
  if (!device_.is_cpu())
    throw Error("quantized weights (--dtype q8_0 / q4_0) run on the CPU only, not on " + device_.str());
  const kernels::QuantType type = weight_dtype_ == WeightDType::kQ8_0 ? kernels::QuantType::kQ8_0 : kernels::QuantType::kQ4_0;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    DecoderLayer& layer = layers_[static_cast<size_t>(l)];
    const std::string p = layer_prefix(l);
    for (auto [linear, name] : {std::pair{&layer.qkv, "self_attn.qkv_proj.weight"}, {&layer.o_proj, "self_attn.o_proj.weight"},
                                {&layer.gate_up, "mlp.gate_up_proj.weight"}, {&layer.down, "mlp.down_proj.weight"}})
      if (!linear->quantized.defined()) linear->quantize(type, p + name);
  }
  if (!lm_head_.quantized.defined()) lm_head_.quantize(type, "lm_head.weight");
  if (!config_.tie_word_embeddings && !embed_quantized_.defined())
    embed_quantized_ = QuantizedWeight::quantize(embed_, type, "model.embed_tokens.weight");
  embed_ = torch::Tensor();
}

torch::Tensor Transformer::embed_rows(const torch::Tensor& ids) const {
  if (embed_.defined()) return embed_.index_select(0, ids).to(torch::kFloat32);
  return (config_.tie_word_embeddings ? lm_head_.quantized : embed_quantized_).rows(ids).to(device_);
}

torch::Tensor Transformer::embedding() const {
  if (embed_.defined()) return embed_;
  return (config_.tie_word_embeddings ? lm_head_.quantized : embed_quantized_).dequantize();
}

torch::Tensor Transformer::lm_head_weight() const {
  return lm_head_.weight.defined() ? lm_head_.weight : lm_head_.quantized.dequantize();
}

void Transformer::load_weights(const std::string& dir) {
  const SafetensorsArchive archive = SafetensorsArchive::open(dir);
  const ModelConfig& c = config_;
  if (weight_dtype_ == WeightDType::kAuto) weight_dtype_ = stored_weight_dtype(archive);
  const torch::ScalarType matrix_dtype = weight_scalar_type(weight_dtype_);
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape) {
    return read_tensor(archive, name, shape, matrix_dtype);
  };
  auto vector = [&](const std::string& name, int64_t size) {
    return read_tensor(archive, name, {size}, torch::kFloat32);
  };
  embed_ = matrix("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
  for (int64_t l = 0; l < c.n_layers; ++l) layers_.push_back(load_decoder_layer(archive, layer_prefix(l), c, matrix_dtype, device_));
  final_norm_ = vector("model.norm.weight", c.hidden_size);
  lm_head_.weight = c.tie_word_embeddings ? embed_ : matrix("lm_head.weight", {c.vocab_size, c.hidden_size});
}

// After loading, on either path: the kernel choice applied to every matrix, and the weights moved
// to the model's device (tensors already there stay as they are).
void Transformer::place_weights() {
  if (kernels_ == Kernels::kTensorOps) {
    for (DecoderLayer& layer : layers_)
      for (Linear* linear : {&layer.qkv, &layer.o_proj, &layer.gate_up, &layer.down}) linear->tensor_ops = true;
    lm_head_.tensor_ops = true;
  }
  if (device_.is_cpu()) return;
  auto move = [&](torch::Tensor& t) { if (t.defined()) t = t.to(device_); };
  move(embed_); move(final_norm_); move(lm_head_.weight);
  if (config_.tie_word_embeddings) lm_head_.weight = embed_;
  for (DecoderLayer& layer : layers_)
    for (torch::Tensor* t : {&layer.input_norm, &layer.qkv.weight, &layer.qkv.bias, &layer.q_norm, &layer.k_norm,
                             &layer.o_proj.weight, &layer.o_proj.bias, &layer.post_norm, &layer.gate_up.weight,
                             &layer.down.weight})
      move(*t);
}

int64_t Transformer::weight_bytes() const {
  auto bytes = [](const torch::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : int64_t{0}; };
  int64_t total = bytes(embed_) + bytes(final_norm_) + (config_.tie_word_embeddings ? 0 : bytes(lm_head_.weight));
  total += embed_quantized_.bytes() + lm_head_.quantized.bytes();
  for (const DecoderLayer& l : layers_) {
    total += bytes(l.input_norm) + bytes(l.qkv.weight) + bytes(l.q_norm) + bytes(l.k_norm) + bytes(l.o_proj.weight) +
             bytes(l.post_norm) + bytes(l.gate_up.weight) + bytes(l.down.weight);
    for (const Linear* linear : {&l.qkv, &l.o_proj, &l.gate_up, &l.down}) total += linear->quantized.bytes();
  }
  return total;
}

KvCache Transformer::make_cache(int64_t n_slots, int64_t capacity) const {
  KvCacheShape shape{config_.n_layers, n_slots, capacity, config_.n_kv_heads, config_.head_dim};
  return KvCache(shape, device_, kv_cache_dtype_);
}

namespace {

// Where slot `slot` of a cache layer's [n_slots, n_kv_heads, capacity, head_dim] tensor starts.
const void* slot_data(const torch::Tensor& layer, int64_t slot) {
  return static_cast<const char*>(layer.data_ptr()) + slot * layer.stride(0) * layer.element_size();
}

}  // namespace

// q: [n_tokens, n_heads, head_dim], rotated; the new keys/values are already in the cache.
// Returns [n_tokens, n_heads * head_dim].
torch::Tensor Transformer::attention(const torch::Tensor& q, KvCache& cache, int64_t layer, const ForwardBatch& batch,
                                     const std::vector<int64_t>& n_past) const {
  const ModelConfig& c = config_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  torch::Tensor out = torch::empty_like(q);
  const torch::Tensor& keys = cache.keys(layer);
  const torch::Tensor& values = cache.values(layer);
  const bool fast = q.is_cpu() && kernels_ == Kernels::kAuto && !(torch::GradMode::is_enabled() && q.requires_grad());

  std::vector<kernels::AttentionSeq> small;  // sequences served by the streaming kernel
  int64_t token_begin = 0;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const SeqChunk& seq = batch.seqs[s];
    const int64_t n_total = n_past[s] + seq.n_new;
    if (fast && seq.n_new <= kSmallBatchRows) {
      small.push_back({slot_data(keys, seq.slot), slot_data(values, seq.slot), n_past[s], token_begin, seq.n_new});
    } else {
      // Long chunk (prefill) or another device: batched matmuls with a causal mask.
      const int64_t group = c.n_heads / c.n_kv_heads;
      torch::Tensor qs = q.narrow(0, token_begin, seq.n_new)
                             .view({seq.n_new, c.n_kv_heads, group, c.head_dim})
                             .permute({1, 2, 0, 3});                                   // [kv, g, new, d]
      torch::Tensor k = cache.read_keys(layer, seq.slot, n_total).unsqueeze(1).to(q.scalar_type());  // [kv, 1, total, d]
      torch::Tensor v = cache.read_values(layer, seq.slot, n_total).unsqueeze(1).to(q.scalar_type());
      torch::Tensor scores = torch::matmul(qs, k.transpose(-1, -2)) * scale;          // [kv, g, new, total]
      torch::Tensor key_pos = torch::arange(n_total, q.options().dtype(torch::kLong));
      torch::Tensor query_pos = torch::arange(n_past[s], n_total, q.options().dtype(torch::kLong));
      torch::Tensor future = key_pos.unsqueeze(0) > query_pos.unsqueeze(1);             // [new, total]
      scores = scores.masked_fill(future, -INFINITY);
      torch::Tensor o = torch::matmul(torch::softmax(scores, -1), v);                  // [kv, g, new, d]
      out.narrow(0, token_begin, seq.n_new).copy_(o.permute({2, 0, 1, 3}).reshape({seq.n_new, c.n_heads, c.head_dim}));
    }
    token_begin += seq.n_new;
  }
  if (!small.empty()) {
    torch::Tensor qc = q.contiguous();
    kernels::attention_small(qc.data_ptr<float>(), c.n_heads * c.head_dim, small.data(),
                             static_cast<int64_t>(small.size()), c.n_heads,
                             c.n_kv_heads, c.head_dim, cache.capacity(), scale, out.data_ptr<float>(),
                             cache.dtype());
  }
  return out.view({q.size(0), c.n_heads * c.head_dim});
}

DecoderLayer load_decoder_layer(const SafetensorsArchive& archive, const std::string& p, const ModelConfig& c,
                                torch::ScalarType matrix_dtype, const torch::Device& device,
                                int64_t attention_input) {
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape) {
    return read_tensor(archive, name, shape, matrix_dtype);
  };
  auto vector = [&](const std::string& name, int64_t size) { return read_tensor(archive, name, {size}, torch::kFloat32); };
  auto bias = [&](const std::string& name, int64_t size) { return c.attention_bias ? vector(name, size) : torch::Tensor(); };
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const int64_t in = attention_input > 0 ? attention_input : c.hidden_size;
  DecoderLayer layer;
  layer.input_norm = vector(p + "input_layernorm.weight", c.hidden_size);
  layer.qkv.weight = read_stacked_rows(
      archive, {{p + "self_attn.q_proj.weight", q_dim}, {p + "self_attn.k_proj.weight", kv_dim},
                {p + "self_attn.v_proj.weight", kv_dim}}, in, matrix_dtype);
  if (c.attention_bias)
    layer.qkv.bias = torch::cat({bias(p + "self_attn.q_proj.bias", q_dim), bias(p + "self_attn.k_proj.bias", kv_dim),
                                 bias(p + "self_attn.v_proj.bias", kv_dim)});
  if (c.qk_norm) {
    layer.q_norm = vector(p + "self_attn.q_norm.weight", c.head_dim);
    layer.k_norm = vector(p + "self_attn.k_norm.weight", c.head_dim);
  }
  layer.o_proj.weight = matrix(p + "self_attn.o_proj.weight", {c.hidden_size, q_dim});
  layer.o_proj.bias = bias(p + "self_attn.o_proj.bias", c.hidden_size);
  layer.post_norm = vector(p + "post_attention_layernorm.weight", c.hidden_size);
  layer.gate_up.weight = read_stacked_rows(
      archive, {{p + "mlp.gate_proj.weight", c.intermediate_size}, {p + "mlp.up_proj.weight", c.intermediate_size}},
      c.hidden_size, matrix_dtype);
  layer.down.weight = matrix(p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size});
  if (!device.is_cpu())
    for (torch::Tensor* t : {&layer.input_norm, &layer.qkv.weight, &layer.qkv.bias, &layer.q_norm, &layer.k_norm,
                             &layer.o_proj.weight, &layer.o_proj.bias, &layer.post_norm, &layer.gate_up.weight,
                             &layer.down.weight})
      if (t->defined()) *t = t->to(device);
  return layer;
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> attention_inputs(const DecoderLayer& layer, const ModelConfig& c,
                                                                         const torch::Tensor& x, const torch::Tensor& cos,
                                                                         const torch::Tensor& sin) {
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  std::vector<int64_t> lead(x.sizes().begin(), x.sizes().end() - 1);
  auto heads = [&](int64_t n, int64_t hd) {
    std::vector<int64_t> shape = lead;
    shape.push_back(n);
    shape.push_back(hd);
    return shape;
  };
  const int64_t last = x.dim() - 1;
  torch::Tensor qkv = layer.qkv.forward(rms_norm(x, layer.input_norm, c.rms_norm_eps));
  torch::Tensor q = qkv.narrow(last, 0, q_dim).reshape(heads(c.n_heads, c.head_dim));
  torch::Tensor k = qkv.narrow(last, q_dim, kv_dim).reshape(heads(c.n_kv_heads, c.head_dim));
  torch::Tensor v = qkv.narrow(last, q_dim + kv_dim, kv_dim).reshape(heads(c.n_kv_heads, c.head_dim));
  if (c.qk_norm) {
    q = rms_norm(q, layer.q_norm, c.rms_norm_eps);
    k = rms_norm(k, layer.k_norm, c.rms_norm_eps);
  }
  return {Rope::apply(q, cos, sin), Rope::apply(k, cos, sin), v};
}

torch::Tensor layer_output(const DecoderLayer& layer, const ModelConfig& c, const torch::Tensor& x,
                           const torch::Tensor& attn) {
  const int64_t last = x.dim() - 1;
  torch::Tensor h = x + layer.o_proj.forward(attn);
  torch::Tensor gate_up = layer.gate_up.forward(rms_norm(h, layer.post_norm, c.rms_norm_eps));
  torch::Tensor act = torch::silu(gate_up.narrow(last, 0, c.intermediate_size)) *
                      gate_up.narrow(last, c.intermediate_size, c.intermediate_size);
  return h + layer.down.forward(act);
}

torch::Tensor Transformer::layer_forward(int64_t l, const torch::Tensor& x, const torch::Tensor& cos,
                                         const torch::Tensor& sin, KvCache& cache, const ForwardBatch& batch,
                                         const std::vector<int64_t>& n_past, const torch::Tensor& write_slots,
                                         const torch::Tensor& write_positions) const {
  auto [q, k, v] = attention_inputs(layers_[l], config_, x, cos, sin);
  cache.write(l, write_slots, write_positions, k, v);
  return layer_output(layers_[l], config_, x, attention(q, cache, l, batch, n_past));
}

void write_kv_rows(KvCache& cache, int64_t l, int64_t slot, int64_t first_position, int64_t n, const float* keys,
                   const float* values, int64_t row_stride) {
  const KvCacheShape& shape = cache.shape();
  const int64_t hd = shape.head_dim;
  const bool bf16 = cache.dtype() == KvCacheDType::kBF16;
  void* k_cache = cache.keys(l).data_ptr();
  void* v_cache = cache.values(l).data_ptr();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < shape.n_kv_heads; ++g) {
      const int64_t dst = ((slot * shape.n_kv_heads + g) * shape.capacity + first_position + i) * hd;
      const float* k = keys + i * row_stride + g * hd;
      const float* v = values + i * row_stride + g * hd;
      if (bf16) {
        // Rounded as torch's conversion rounds (nearest even), so this path and the tensor-ops
        // path store the same bits. Keys go to their key block (kernels/attention_small.h).
        const int64_t position = first_position + i;
        const int64_t block = ((slot * shape.n_kv_heads + g) * shape.capacity + position / kKeyBlock * kKeyBlock) * hd;
        uint16_t* k_block = static_cast<uint16_t*>(k_cache) + block;
        for (int64_t e = 0; e < hd; ++e) {
          k_block[kernels::bf16_key_offset(position % kKeyBlock, e)] = kernels::f32_to_bf16(k[e]);
          static_cast<uint16_t*>(v_cache)[dst + e] = kernels::f32_to_bf16(v[e]);
        }
      } else {
        std::memcpy(static_cast<float*>(k_cache) + dst, k, hd * sizeof(float));
        std::memcpy(static_cast<float*>(v_cache) + dst, v, hd * sizeof(float));
      }
    }
  }
}

void decoder_layer_rows(const DecoderLayer& layer, const ModelConfig& c, KvCache& cache, int64_t l,
                        const std::vector<RowsSeq>& seqs, const torch::Tensor& cos, const torch::Tensor& sin,
                        torch::Tensor& x) {
  const int64_t n = x.size(0), hidden = c.hidden_size, hd = c.head_dim, inter = c.intermediate_size;
  const int64_t q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd, qkv_dim = q_dim + 2 * kv_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  DSPARK_ASSERT(x.is_cpu() && x.is_contiguous() && n <= kSmallBatchRows);
  float* xp = x.data_ptr<float>();

  // The layer's intermediate rows, in one buffer kept across calls: no tensor is made per layer
  // (Linear::forward_rows says what that saves). A forward runs its layers one after another on
  // one thread, so one buffer per thread serves them all.
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(n * (hidden + qkv_dim + q_dim + hidden + 2 * inter + inter + hidden)));
  float* h = scratch.data();              // [n, hidden] normed rows
  float* qkv_p = h + n * hidden;          // [n, q_dim + 2 kv_dim]
  float* attn = qkv_p + n * qkv_dim;      // [n, q_dim]
  float* o = attn + n * q_dim;            // [n, hidden]
  float* gate_up = o + n * hidden;        // [n, 2 inter]
  float* act = gate_up + n * 2 * inter;   // [n, inter]
  float* down = act + n * inter;          // [n, hidden]

  kernels::rms_norm_rows(xp, layer.input_norm.data_ptr<float>(), n, hidden, eps, h);
  layer.qkv.forward_rows(h, n, qkv_p);
  const float* q_norm = c.qk_norm ? layer.q_norm.data_ptr<float>() : nullptr;
  const float* k_norm = c.qk_norm ? layer.k_norm.data_ptr<float>() : nullptr;
  kernels::norm_rope_heads(qkv_p, n, qkv_dim, c.n_heads, hd, q_norm, eps, cos.data_ptr<float>(), sin.data_ptr<float>());
  kernels::norm_rope_heads(qkv_p + q_dim, n, qkv_dim, c.n_kv_heads, hd, k_norm, eps, cos.data_ptr<float>(),
                           sin.data_ptr<float>());

  std::vector<kernels::AttentionSeq> attention_seqs;
  int64_t row = 0;
  for (const RowsSeq& seq : seqs) {
    write_kv_rows(cache, l, seq.slot, seq.n_past, seq.n_new, qkv_p + row * qkv_dim + q_dim,
                  qkv_p + row * qkv_dim + q_dim + kv_dim, qkv_dim);
    attention_seqs.push_back({slot_data(cache.keys(l), seq.slot), slot_data(cache.values(l), seq.slot), seq.n_past,
                              row, seq.n_new, seq.causal});
    row += seq.n_new;
  }
  DSPARK_ASSERT(row == n);
  // q is read in place from the fused q/k/v rows.
  kernels::attention_small(qkv_p, qkv_dim, attention_seqs.data(), static_cast<int64_t>(attention_seqs.size()),
                           c.n_heads, c.n_kv_heads, hd, cache.capacity(),
                           1.0f / std::sqrt(static_cast<float>(hd)), attn, cache.dtype());
  layer.o_proj.forward_rows(attn, n, o);
  kernels::add_in_place(xp, o, n * hidden);

  kernels::rms_norm_rows(xp, layer.post_norm.data_ptr<float>(), n, hidden, eps, h);
  layer.gate_up.forward_rows(h, n, gate_up);
  kernels::silu_mul_rows(gate_up, n, inter, act);
  layer.down.forward_rows(act, n, down);
  kernels::add_in_place(xp, down, n * hidden);
}

namespace {

// A piece of a long batch: rows [index * max_tokens, ...) of the whole; answers[i] is the index in
// the whole batch's logit_rows of the piece's i-th logit row.
struct BatchPiece {
  ForwardBatch batch;
  std::vector<int64_t> answers;
};

// Cuts `batch` into consecutive pieces of max_tokens tokens (the last one shorter), in row order.
// A sequence may straddle pieces: run in order, its later tokens see the earlier ones through the
// cache. Every piece captures the same layers; each asks for the logits of its own rows.
std::vector<BatchPiece> split_batch(const ForwardBatch& batch, int64_t max_tokens) {
  const int64_t n_tokens = static_cast<int64_t>(batch.token_ids.size());
  std::vector<BatchPiece> pieces((n_tokens + max_tokens - 1) / max_tokens);
  for (size_t p = 0; p < pieces.size(); ++p) {
    ForwardBatch& piece = pieces[p].batch;
    const int64_t begin = static_cast<int64_t>(p) * max_tokens, end = std::min(begin + max_tokens, n_tokens);
    piece.token_ids.assign(batch.token_ids.begin() + begin, batch.token_ids.begin() + end);
    piece.capture_layers = batch.capture_layers;
    piece.capture_final_hidden = batch.capture_final_hidden;
  }
  int64_t row = 0;  // the first row of each sequence
  for (const SeqChunk& seq : batch.seqs) {
    for (int64_t r = row; r < row + seq.n_new; r = (r / max_tokens + 1) * max_tokens) {
      const int64_t take = std::min(row + seq.n_new, (r / max_tokens + 1) * max_tokens) - r;
      pieces[r / max_tokens].batch.seqs.push_back({seq.slot, take});
    }
    row += seq.n_new;
  }
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    BatchPiece& piece = pieces[batch.logit_rows[i] / max_tokens];
    piece.batch.logit_rows.push_back(batch.logit_rows[i] % max_tokens);
    piece.answers.push_back(static_cast<int64_t>(i));
  }
  return pieces;
}

}  // namespace

ForwardOutput Transformer::forward(KvCache& cache, const ForwardBatch& batch) {
  check_batch(cache, batch);
  const bool long_batch = static_cast<int64_t>(batch.token_ids.size()) > kSmallBatchRows;
  return runs_rows_path() && long_batch ? forward_in_pieces(cache, batch) : forward_checked(cache, batch);
}

bool Transformer::runs_rows_path() const {
  return device_.is_cpu() && kernels_ == Kernels::kAuto &&
         !(torch::GradMode::is_enabled() && embed_.defined() && embed_.requires_grad());
}

ForwardOutput Transformer::forward_in_pieces(KvCache& cache, const ForwardBatch& batch) {
  const std::vector<BatchPiece> pieces = split_batch(batch, kSmallBatchRows);
  ForwardOutput out;
  if (!batch.logit_rows.empty())
    out.logits = torch::empty({static_cast<int64_t>(batch.logit_rows.size()), config_.vocab_size},
                              torch::TensorOptions().dtype(torch::kFloat32).device(device_));
  std::vector<std::vector<torch::Tensor>> layer_parts(batch.capture_layers.size());
  std::vector<torch::Tensor> final_parts;
  for (const BatchPiece& piece : pieces) {
    ForwardOutput part = forward_checked(cache, piece.batch);
    if (!piece.answers.empty())
      out.logits.index_copy_(0, torch::tensor(piece.answers, torch::TensorOptions().dtype(torch::kLong)), part.logits);
    for (size_t i = 0; i < layer_parts.size(); ++i) layer_parts[i].push_back(part.layer_hidden[i]);
    if (batch.capture_final_hidden) final_parts.push_back(part.final_hidden);
  }
  for (const std::vector<torch::Tensor>& parts : layer_parts) out.layer_hidden.push_back(torch::cat(parts));
  if (batch.capture_final_hidden) out.final_hidden = torch::cat(final_parts);
  return out;
}

void Transformer::check_batch(const KvCache& cache, const ForwardBatch& batch) const {
  const ModelConfig& c = config_;
  const int64_t n_tokens = static_cast<int64_t>(batch.token_ids.size());
  int64_t n_declared = 0;
  std::vector<int64_t> slots;
  for (const SeqChunk& seq : batch.seqs) {
    if (seq.n_new < 1) throw Error("forward: every sequence needs at least one new token");
    cache.check_room(seq.slot, seq.n_new);
    c.check_positions(cache.length(seq.slot) + seq.n_new, "forward");
    // Both chunks would be written at the slot's next positions, the second over the first.
    if (std::find(slots.begin(), slots.end(), seq.slot) != slots.end())
      throw Error("forward: slot " + std::to_string(seq.slot) + " appears twice in one batch");
    slots.push_back(seq.slot);
    n_declared += seq.n_new;
  }
  if (n_declared != n_tokens || n_tokens == 0)
    throw Error("forward: the sequences declare " + std::to_string(n_declared) + " new tokens but " +
                std::to_string(n_tokens) + " were given");
  for (int64_t id : batch.token_ids)
    if (id < 0 || id >= c.vocab_size)
      throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(c.vocab_size) + ")");
  for (int64_t row : batch.logit_rows)
    if (row < 0 || row >= n_tokens) throw Error("forward: logit row " + std::to_string(row) + " out of range");
  for (int64_t layer : batch.capture_layers)
    if (layer < 0 || layer >= c.n_layers)
      throw Error("forward: capture layer " + std::to_string(layer) + " out of range [0, " +
                  std::to_string(c.n_layers) + ")");
}

ForwardOutput Transformer::forward_checked(KvCache& cache, const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  const int64_t n_tokens = static_cast<int64_t>(batch.token_ids.size());
  // Per-token slot and position: the sequence index ("marker") made concrete.
  std::vector<int64_t> n_past, slots, positions;
  for (const SeqChunk& seq : batch.seqs) {
    n_past.push_back(cache.length(seq.slot));
    for (int64_t i = 0; i < seq.n_new; ++i) {
      slots.push_back(seq.slot);
      positions.push_back(n_past.back() + i);
    }
  }
  auto long_options = torch::TensorOptions().dtype(torch::kLong);
  torch::Tensor write_slots = torch::tensor(slots, long_options).to(device_);
  torch::Tensor write_positions = torch::tensor(positions, long_options).to(device_);
  torch::Tensor ids = torch::tensor(batch.token_ids, long_options).to(device_);
  auto [cos, sin] = rope_.cos_sin(write_positions);

  ForwardOutput out;
  out.layer_hidden.resize(batch.capture_layers.size());  // in the order asked (DeepSpec concatenates so)
  torch::Tensor x = embed_rows(ids).contiguous();
  const bool rows_path = runs_rows_path() && n_tokens <= kSmallBatchRows;
  const torch::Tensor cos_rows = cos.view({n_tokens, c.head_dim}).contiguous();
  const torch::Tensor sin_rows = sin.view({n_tokens, c.head_dim}).contiguous();
  std::vector<RowsSeq> rows_seqs;
  for (size_t s = 0; s < batch.seqs.size(); ++s) rows_seqs.push_back({batch.seqs[s].slot, n_past[s], batch.seqs[s].n_new});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (rows_path)
      decoder_layer_rows(layers_[l], c, cache, l, rows_seqs, cos_rows, sin_rows, x);
    else
      x = layer_forward(l, x, cos, sin, cache, batch, n_past, write_slots, write_positions);
    for (size_t i = 0; i < batch.capture_layers.size(); ++i)
      if (batch.capture_layers[i] == l) out.layer_hidden[i] = rows_path ? x.clone() : x;  // rows path updates x in place
  }

  torch::Tensor final_hidden;
  if (batch.capture_final_hidden) {
    final_hidden = rms_norm(x, final_norm_, c.rms_norm_eps);
    out.final_hidden = final_hidden;
  }
  if (!batch.logit_rows.empty()) {
    torch::Tensor rows = torch::tensor(batch.logit_rows, long_options).to(device_);
    torch::Tensor selected = final_hidden.defined() ? final_hidden.index_select(0, rows)
                                                    : rms_norm(x.index_select(0, rows), final_norm_, c.rms_norm_eps);
    out.logits = lm_head_.forward(selected);
  }
  for (const SeqChunk& seq : batch.seqs) cache.commit(seq.slot, seq.n_new);
  return out;
}

ForwardOutput Transformer::forward_sequences(const torch::Tensor& ids, const std::vector<int64_t>& capture_layers) const {
  const ModelConfig& c = config_;
  DSPARK_ASSERT(ids.dim() == 2);
  const int64_t batch = ids.size(0), len = ids.size(1);
  for (int64_t layer : capture_layers)
    if (layer < 0 || layer >= c.n_layers) throw Error("capture layer " + std::to_string(layer) + " out of range");
  auto [cos, sin] = rope_.cos_sin(torch::arange(len, ids.options()));  // [len, 1, hd]
  torch::Tensor causal = torch::ones({len, len}, ids.options().dtype(torch::kBool)).triu(1);
  const int64_t group = c.n_heads / c.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

  ForwardOutput out;
  out.layer_hidden.resize(capture_layers.size());
  torch::Tensor x = embed_rows(ids.reshape({-1})).view({batch, len, c.hidden_size});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto [q, k, v] = attention_inputs(layers_[l], c, x, cos, sin);  // [b, len, heads, hd]
    torch::Tensor qs = q.view({batch, len, c.n_kv_heads, group, c.head_dim}).permute({0, 2, 3, 1, 4});
    torch::Tensor ks = k.permute({0, 2, 1, 3}).unsqueeze(2);  // [b, kv, 1, len, hd]
    torch::Tensor vs = v.permute({0, 2, 1, 3}).unsqueeze(2);
    torch::Tensor scores = torch::matmul(qs, ks.transpose(-1, -2)) * scale;  // [b, kv, g, len, len]
    torch::Tensor probs = torch::softmax(scores.masked_fill(causal, -INFINITY), -1);
    torch::Tensor attn = torch::matmul(probs, vs).permute({0, 3, 1, 2, 4}).reshape({batch, len, c.n_heads * c.head_dim});
    x = layer_output(layers_[l], c, x, attn);
    for (size_t i = 0; i < capture_layers.size(); ++i)
      if (capture_layers[i] == l) out.layer_hidden[i] = x;
  }
  out.final_hidden = rms_norm(x, final_norm_, c.rms_norm_eps);
  return out;
}

torch::Tensor Transformer::lm_head(const torch::Tensor& final_hidden) const { return lm_head_.forward(final_hidden); }

std::vector<std::pair<std::string, torch::Tensor>> Transformer::named_parameters() const {
  if (is_quantized(weight_dtype_))
    throw Error("a model loaded with quantized weights can be neither trained nor saved as safetensors "
                "(write a GGUF file with `dspark model quantize`)");
  std::vector<std::pair<std::string, torch::Tensor>> params{{"model.embed_tokens.weight", embed_}};
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    const std::string p = layer_prefix(l);
    const DecoderLayer& layer = layers_[l];
    params.emplace_back(p + "input_layernorm.weight", layer.input_norm);
    params.emplace_back(p + "self_attn.qkv_proj.weight", layer.qkv.weight);
    if (layer.qkv.bias.defined()) params.emplace_back(p + "self_attn.qkv_proj.bias", layer.qkv.bias);
    if (layer.q_norm.defined()) params.emplace_back(p + "self_attn.q_norm.weight", layer.q_norm);
    if (layer.k_norm.defined()) params.emplace_back(p + "self_attn.k_norm.weight", layer.k_norm);
    params.emplace_back(p + "self_attn.o_proj.weight", layer.o_proj.weight);
    if (layer.o_proj.bias.defined()) params.emplace_back(p + "self_attn.o_proj.bias", layer.o_proj.bias);
    params.emplace_back(p + "post_attention_layernorm.weight", layer.post_norm);
    params.emplace_back(p + "mlp.gate_up_proj.weight", layer.gate_up.weight);
    params.emplace_back(p + "mlp.down_proj.weight", layer.down.weight);
  }
  params.emplace_back("model.norm.weight", final_norm_);
  if (!config_.tie_word_embeddings) params.emplace_back("lm_head.weight", lm_head_.weight);
  return params;
}

void Transformer::set_requires_grad(bool requires_grad) {
  for (auto& [name, tensor] : named_parameters()) tensor.requires_grad_(requires_grad);
}

void Transformer::save(const std::string& dir, WeightDType dtype, size_t max_shard_bytes) const {
  const ModelConfig& c = config_;
  if (dtype == WeightDType::kAuto) dtype = weight_dtype_;
  const torch::ScalarType matrix_dtype = weight_scalar_type(dtype);
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // HF names, fused tensors split
  for (auto& [name, t] : named_parameters()) {
    const bool is_matrix = t.dim() == 2;
    auto add = [&, is_matrix](std::string n, torch::Tensor v) {
      v = v.detach().to(torch::kCPU).to(is_matrix ? matrix_dtype : torch::kFloat32);
      tensors.emplace_back(std::move(n), v.contiguous());
    };
    const size_t fused_qkv = name.find("qkv_proj"), fused_mlp = name.find("gate_up_proj");
    if (fused_qkv != std::string::npos) {
      const std::string p = name.substr(0, fused_qkv), suffix = name.substr(fused_qkv + 8);
      add(p + "q_proj" + suffix, t.narrow(0, 0, q_dim));
      add(p + "k_proj" + suffix, t.narrow(0, q_dim, kv_dim));
      add(p + "v_proj" + suffix, t.narrow(0, q_dim + kv_dim, kv_dim));
    } else if (fused_mlp != std::string::npos) {
      const std::string p = name.substr(0, fused_mlp);
      add(p + "gate_proj.weight", t.narrow(0, 0, c.intermediate_size));
      add(p + "up_proj.weight", t.narrow(0, c.intermediate_size, c.intermediate_size));
    } else {
      add(name, t);
    }
  }
  std::filesystem::create_directories(dir);
  std::vector<TensorToWrite> to_write;
  size_t total_bytes = 0;
  for (const auto& [name, t] : tensors) {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    to_write.push_back({name, safetensors_dtype(t.scalar_type()), shape, t.data_ptr(),
                        static_cast<size_t>(t.numel() * t.element_size())});
    total_bytes += to_write.back().n_bytes;
  }
  if (max_shard_bytes > 0 && total_bytes > max_shard_bytes)
    write_sharded_safetensors(dir, to_write, max_shard_bytes);
  else
    write_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), to_write);
  nlohmann::json json = c.to_json();
  json["torch_dtype"] = torch_dtype_name(dtype);
  write_json_file(std::filesystem::path(dir) / "config.json", json);
}

ForwardOutput Transformer::prefill(KvCache& cache, int64_t slot, const std::vector<int64_t>& token_ids,
                                   const std::vector<int64_t>& capture_layers) {
  ForwardBatch batch;
  batch.token_ids = token_ids;
  batch.seqs = {{slot, static_cast<int64_t>(token_ids.size())}};
  batch.logit_rows = {static_cast<int64_t>(token_ids.size()) - 1};
  batch.capture_layers = capture_layers;
  return forward(cache, batch);
}

torch::Tensor Transformer::decode(KvCache& cache, const std::vector<int64_t>& slots,
                                  const std::vector<int64_t>& token_ids) {
  DSPARK_ASSERT(slots.size() == token_ids.size());
  ForwardBatch batch;
  batch.token_ids = token_ids;
  for (size_t i = 0; i < slots.size(); ++i) {
    batch.seqs.push_back({slots[i], 1});
    batch.logit_rows.push_back(static_cast<int64_t>(i));
  }
  return forward(cache, batch).logits;
}

}  // namespace dspark::model
