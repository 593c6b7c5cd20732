// ggml's tensor types and llama.cpp's block formats: exact dequantization of the types we read and
// llama.cpp's reference (round-to-nearest) quantization of the ones we write.
//
// Block layouts (all little-endian, ggml-common.h), QK = values per block:
//   Q8_0 (QK 32, 34 bytes): f16 d, int8 qs[32];                  x = d * q
//   Q4_0 (QK 32, 18 bytes): f16 d, uint8 qs[16];                 x[j] = d * ((qs[j] & 15) - 8),
//                                                                x[j + 16] = d * ((qs[j] >> 4) - 8)
//   Q4_K (QK 256, 144 bytes): f16 d, f16 dmin, uint8 scales[12] (8 pairs of 6-bit scale/min),
//        uint8 qs[128];  per 32 values: x = (d * sc) * q - (dmin * m)
//   Q5_K (QK 256, 176 bytes): as Q4_K plus uint8 qh[32] (the fifth bit), before qs
//   Q6_K (QK 256, 210 bytes): uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d;
//        per 16 values: x = (d * scale) * (q - 32), q 6-bit from ql (low 4) and qh (high 2)
// The arithmetic is float32 in the order of llama.cpp's dequantize_row_* (and of gguf-py's
// reference quants.dequantize, which the fixtures come from), compiled without fused multiply-adds,
// so the values are bit-identical.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace dspark::model {

enum class GgmlType : uint32_t {  // numbered as in ggml.h
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39,
};

struct GgmlTypeInfo {
  const char* name;    // as ggml spells it: "F32", "Q4_K", ...
  int64_t block_size;  // values per block
  size_t block_bytes;  // bytes per block
};

// The layout of ggml type number `type`; nullopt for a number ggml does not define.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);
const char* ggml_type_name(GgmlType type);
// "f32" | "f16" | "bf16" | "q8_0" | "q4_0" (any case) -> type; nullopt otherwise.
std::optional<GgmlType> parse_ggml_type(const std::string& name);

// Whether dequantize_row handles `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K.
bool can_dequantize(GgmlType type);
// Whether quantize_row writes `type`: F32, F16, BF16, Q8_0, Q4_0.
bool can_quantize(GgmlType type);

// n values (a multiple of the type's block size) from `src` (n / block_size blocks) into dst.
// DSPARK_ASSERTs can_dequantize(type); callers check and report.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
// n values (a multiple of the block size) into n / block_size blocks at dst, as llama.cpp's
// quantize_row_*_ref does (F16/BF16: round to nearest even). DSPARK_ASSERTs can_quantize(type).
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);
// Bytes of n values of `type` (n a multiple of its block size).
size_t ggml_row_bytes(GgmlType type, int64_t n);

}  // namespace dspark::model
