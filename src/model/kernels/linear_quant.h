// Matrix multiply with 8- and 4-bit block-quantized weights (llama.cpp's Q8_0 and Q4_0) for the
// rows of a decode, verify or drafting step: y = x @ dequant(w)^T.
//
// Weights: 32 values per block, one f16 scale d per block; Q8_0 holds int8 q (x = d q), Q4_0
// 4-bit q (x = d (q - 8)). In memory they are repacked from llama.cpp's row-major blocks into
// groups of 16 output rows (pack_quant_rows), so that one 64-byte load holds 4 consecutive values
// of each of 16 rows: an integer dot-product instruction (AVX512-VNNI vpdpbusd) then multiplies
// them by 4 activations broadcast to all lanes and keeps one output row per lane, with no
// horizontal sums. Group-major order (every block of rows 0-15, then rows 16-31, ...) makes each
// thread's share one sequential stream. The packed form takes exactly the bytes of the GGUF blocks.
//
// Activations: each call quantizes x per row and block of 32 as llama.cpp's quantize_row_q8_0
// does (d = max|x| / 127, q = round(x / d), d then kept as f16), so a block's dot product is an
// exact integer sum and y[i, r] = sum over blocks of (d_w d_x) * sum(q_w q_x), accumulated in f32
// in block order: llama.cpp's own arithmetic for these types (its logits on a GGUF file's
// decode steps are reproduced exactly, tests/model/test_gguf_loader.cpp).
// Every variant computes exactly these operations in this order, so all variants give the same
// bits, and a row's result never depends on the other rows of the call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dspark::kernels {

enum class QuantType { kQ8_0, kQ4_0 };

inline constexpr int64_t kQuantBlock = 32;      // values per block
inline constexpr int64_t kQuantGroupRows = 16;  // rows interleaved in the packed layout

// Bytes of one block in llama.cpp's layout: 34 (Q8_0) or 18 (Q4_0).
size_t quant_block_bytes(QuantType type);
// Bytes of the packed form of n rows of k values: n rounded up to a multiple of 16, times k / 32
// blocks (the padding rows have zero scales).
size_t packed_quant_bytes(QuantType type, int64_t n, int64_t k);

// rows: n rows of k / 32 blocks each in llama.cpp's layout (a GGUF tensor's data) -> the packed
// layout above, written to out (packed_quant_bytes). k must be a multiple of 32.
void pack_quant_rows(QuantType type, const void* rows, int64_t n, int64_t k, void* out);
// The inverse: row `row` of a packed matrix back to llama.cpp's blocks (k / 32 of them).
void unpack_quant_row(QuantType type, const void* packed, int64_t n, int64_t k, int64_t row, void* out);
// Row `row` of a packed matrix dequantized to f32 (an embedding lookup from a tied, quantized head).
void dequantize_packed_row(QuantType type, const void* packed, int64_t n, int64_t k, int64_t row,
                           float* out);  // [k]

// y[m, :n] = x[m, k] @ dequant(w)^T, or += with accumulate; y's rows ldy apart (ldy >= n).
// w is packed (pack_quant_rows) for n rows; k a multiple of 32. Any m; the SIMD variant follows
// current_isa() (AVX-512 needs AVX512-VNNI too, else AVX2 runs; AMX takes calls of several rows).
void linear_quant(const float* x,  // [m, k]
                  int64_t m, int64_t k,
                  const void* w,  // packed [n, k]
                  QuantType type, int64_t n,
                  float* y,  // [m, ldy]
                  int64_t ldy, bool accumulate);

}  // namespace dspark::kernels
