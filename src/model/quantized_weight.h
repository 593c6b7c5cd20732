// A weight matrix held in llama.cpp's Q8_0 or Q4_0 blocks, packed for the quantized kernels
// (kernels/linear_quant.h): what a Linear multiplies with when the model is loaded with
// --dtype q8_0|q4_0 or from a GGUF file of those types, and where a quantized model's embedding
// rows are read from. CPU only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/kernels/linear_quant.h"

namespace dspark::model {

struct QuantizedWeight {
  kernels::QuantType type = kernels::QuantType::kQ8_0;
  int64_t n_out = 0, n_in = 0;
  torch::Tensor packed;  // uint8 [packed_quant_bytes(type, n_out, n_in)], CPU

  bool defined() const { return packed.defined(); }
  int64_t bytes() const { return defined() ? packed.numel() : 0; }

  // values [n_out, n_in] (any float dtype, any device) quantized as llama.cpp's reference
  // quantizer does; n_in must be a multiple of 32 (dspark::Error otherwise, naming `name`).
  static QuantizedWeight quantize(const torch::Tensor& values, kernels::QuantType type, const std::string& name);
  // n_out rows of llama.cpp blocks (a GGUF tensor's data), copied into the packed layout.
  static QuantizedWeight from_blocks(const void* blocks, int64_t n_out, int64_t n_in, kernels::QuantType type);
  // Row blocks stacked from several places (q, k and v of a GGUF file, read where the file maps
  // them): each part is packed straight into its own groups when the parts before it fill whole
  // groups of 16 rows, else the parts are gathered first.
  struct Part {
    const void* blocks;
    int64_t rows;
  };
  static QuantizedWeight from_parts(const std::vector<Part>& parts, int64_t n_in, kernels::QuantType type);

  // Rows [begin, begin + n) as a matrix of their own, the same blocks bit for bit (a drafter's
  // context K/V projection: the k and v rows of its fused q/k/v matrix).
  QuantizedWeight row_range(int64_t begin, int64_t n) const;
  // Rows of the matrix (an embedding lookup): ids [n] int64 -> [n, n_in] f32.
  torch::Tensor rows(const torch::Tensor& ids) const;
  torch::Tensor dequantize() const;  // [n_out, n_in] f32
};

}  // namespace dspark::model
