#include "model/quantized_weight.h"

#include "common/error.h"
#include "model/ggml_quants.h"

namespace dspark::model {
namespace {

GgmlType ggml_type(kernels::QuantType type) {
  return type == kernels::QuantType::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
}

QuantizedWeight empty(kernels::QuantType type, int64_t n_out, int64_t n_in) {
  QuantizedWeight w;
  w.type = type;
  w.n_out = n_out;
  w.n_in = n_in;
  w.packed = torch::empty({static_cast<int64_t>(kernels::packed_quant_bytes(type, n_out, n_in))}, torch::kUInt8);
  return w;
}

}  // namespace

QuantizedWeight QuantizedWeight::quantize(const torch::Tensor& values, kernels::QuantType type,
                                          const std::string& name) {
  DSPARK_ASSERT(values.dim() == 2);
  const int64_t n_out = values.size(0), n_in = values.size(1);
  if (n_in % kernels::kQuantBlock != 0)
    throw Error(name + ": rows of " + std::to_string(n_in) + " values cannot be quantized in blocks of 32");
  const torch::Tensor f32 = values.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  std::vector<uint8_t> blocks(static_cast<size_t>(n_out) * (n_in / kernels::kQuantBlock) *
                              kernels::quant_block_bytes(type));
  quantize_row(ggml_type(type), f32.data_ptr<float>(), blocks.data(), n_out * n_in);
  return from_blocks(blocks.data(), n_out, n_in, type);
}

QuantizedWeight QuantizedWeight::from_blocks(const void* blocks, int64_t n_out, int64_t n_in,
                                             kernels::QuantType type) {
  return from_parts({{blocks, n_out}}, n_in, type);
}

QuantizedWeight QuantizedWeight::from_parts(const std::vector<Part>& parts, int64_t n_in, kernels::QuantType type) {
  int64_t n_out = 0;
  bool whole_groups = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    n_out += parts[i].rows;
    if (i + 1 < parts.size() && parts[i].rows % kernels::kQuantGroupRows != 0) whole_groups = false;
  }
  QuantizedWeight w = empty(type, n_out, n_in);
  auto* out = static_cast<uint8_t*>(w.packed.data_ptr());
  if (whole_groups) {
    for (const Part& part : parts) {
      kernels::pack_quant_rows(type, part.blocks, part.rows, n_in, out);
      out += kernels::packed_quant_bytes(type, part.rows, n_in);
    }
    return w;
  }
  const size_t row_bytes = static_cast<size_t>(n_in / kernels::kQuantBlock) * kernels::quant_block_bytes(type);
  std::vector<uint8_t> gathered;
  gathered.reserve(static_cast<size_t>(n_out) * row_bytes);
  for (const Part& part : parts) {
    const auto* from = static_cast<const uint8_t*>(part.blocks);
    gathered.insert(gathered.end(), from, from + static_cast<size_t>(part.rows) * row_bytes);
  }
  kernels::pack_quant_rows(type, gathered.data(), n_out, n_in, out);
  return w;
}

QuantizedWeight QuantizedWeight::row_range(int64_t begin, int64_t n) const {
  DSPARK_ASSERT(defined() && begin >= 0 && n >= 0 && begin + n <= n_out);
  const size_t row_bytes = static_cast<size_t>(n_in / kernels::kQuantBlock) * kernels::quant_block_bytes(type);
  std::vector<uint8_t> blocks(static_cast<size_t>(n) * row_bytes);
  for (int64_t i = 0; i < n; ++i)
    kernels::unpack_quant_row(type, packed.data_ptr(), n_out, n_in, begin + i, blocks.data() + static_cast<size_t>(i) * row_bytes);
  return from_blocks(blocks.data(), n, n_in, type);
}

torch::Tensor QuantizedWeight::rows(const torch::Tensor& ids) const {
  const torch::Tensor cpu_ids = ids.to(torch::kCPU, torch::kLong).contiguous();
  torch::Tensor out = torch::empty({cpu_ids.numel(), n_in}, torch::kFloat32);
  const int64_t* id = cpu_ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < cpu_ids.numel(); ++i) {
    if (id[i] < 0 || id[i] >= n_out) throw Error("token id " + std::to_string(id[i]) + " is out of range");
    kernels::dequantize_packed_row(type, packed.data_ptr(), n_out, n_in, id[i], out[i].data_ptr<float>());
  }
  return out;
}

torch::Tensor QuantizedWeight::dequantize() const {
  torch::Tensor out = torch::empty({n_out, n_in}, torch::kFloat32);
  for (int64_t r = 0; r < n_out; ++r)
    kernels::dequantize_packed_row(type, packed.data_ptr(), n_out, n_in, r, out[r].data_ptr<float>());
  return out;
}

}  // namespace dspark::model
