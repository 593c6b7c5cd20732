#include "model/ggml_quants.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/safetensors.h"  // f16/bf16 <-> f32

namespace dspark::model {

namespace {

constexpr int64_t kQK = 32;    // values per Q8_0 / Q4_0 block
constexpr int64_t kQKK = 256;  // values per K-quant super-block

struct TypeRow {
  uint32_t type;
  GgmlTypeInfo info;
};

// ggml.c's type_traits: name, block size, bytes per block.
constexpr TypeRow kTypes[] = {
    {0, {"F32", 1, 4}},           {1, {"F16", 1, 2}},          {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},        {6, {"Q5_0", 32, 22}},       {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},        {9, {"Q8_1", 32, 36}},       {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},     {12, {"Q4_K", 256, 144}},    {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},     {15, {"Q8_K", 256, 292}},    {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}},    {18, {"IQ3_XXS", 256, 98}},  {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},     {21, {"IQ3_S", 256, 110}},   {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}},   {24, {"I8", 1, 1}},          {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},          {27, {"I64", 1, 8}},         {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},     {30, {"BF16", 1, 2}},        {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},     {39, {"MXFP4", 32, 17}},
};

uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void write_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void dequantize_q8_0(const uint8_t* block, float* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, block += 34, y += kQK) {
    const float d = f16_to_f32(read_u16(block));
    const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
    for (int64_t j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(qs[j]);
  }
}

void dequantize_q4_0(const uint8_t* block, float* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, block += 18, y += kQK) {
    const float d = f16_to_f32(read_u16(block));
    const uint8_t* qs = block + 2;
    for (int64_t j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

// The j-th 6-bit (scale, min) pair of a Q4_K / Q5_K block's 12 scale bytes (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K and Q5_K share everything but the fifth bit (qh == nullptr for Q4_K).
void dequantize_k4_k5(const uint8_t* block, float* y, int64_t n_blocks, bool five_bits) {
  const size_t block_bytes = five_bits ? 176 : 144;
  for (int64_t b = 0; b < n_blocks; ++b, block += block_bytes) {
    const float d = f16_to_f32(read_u16(block));
    const float dmin = f16_to_f32(read_u16(block + 2));
    const uint8_t* scales = block + 4;
    const uint8_t* qh = five_bits ? block + 16 : nullptr;
    const uint8_t* ql = block + (five_bits ? 48 : 16);
    uint8_t high_lo = 1, high_hi = 2;  // the qh bits of this 64-value group's two halves
    for (int group = 0; group < 4; ++group, ql += 32, y += 64) {
      uint8_t sc = 0, m = 0;
      scale_min_k4(2 * group, scales, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * group + 1, scales, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int lo = (ql[l] & 0x0f) + (qh && (qh[l] & high_lo) ? 16 : 0);
        const int hi = (ql[l] >> 4) + (qh && (qh[l] & high_hi) ? 16 : 0);
        y[l] = d1 * static_cast<float>(lo) - m1;
        y[l + 32] = d2 * static_cast<float>(hi) - m2;
      }
      high_lo = static_cast<uint8_t>(high_lo << 2);
      high_hi = static_cast<uint8_t>(high_hi << 2);
    }
  }
}

void dequantize_q6_k(const uint8_t* block, float* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, block += 210) {
    const uint8_t* ql = block;
    const uint8_t* qh = block + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192);
    const float d = f16_to_f32(read_u16(block + 208));
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = (d * static_cast<float>(sc[is + 0])) * static_cast<float>(q1);
        y[l + 32] = (d * static_cast<float>(sc[is + 2])) * static_cast<float>(q2);
        y[l + 64] = (d * static_cast<float>(sc[is + 4])) * static_cast<float>(q3);
        y[l + 96] = (d * static_cast<float>(sc[is + 6])) * static_cast<float>(q4);
      }
    }
  }
}

// quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d) (roundf: half away from zero).
void quantize_q8_0(const float* x, uint8_t* block, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kQK, block += 34) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    write_u16(block, f32_to_f16(d));
    int8_t* qs = reinterpret_cast<int8_t*>(block + 2);
    for (int64_t j = 0; j < kQK; ++j) qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

// quantize_row_q4_0_ref: d = (the value of largest magnitude) / -8, q = min(15, trunc(x / d + 8.5)).
void quantize_q4_0(const float* x, uint8_t* block, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kQK, block += 18) {
    float amax = 0.0f, max = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    write_u16(block, f32_to_f16(d));
    for (int64_t j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[kQK / 2 + j] * id;
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x0 + 8.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x1 + 8.5f)));
      block[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  for (const TypeRow& row : kTypes)
    if (row.type == type) return row.info;
  return std::nullopt;
}

const char* ggml_type_name(GgmlType type) {
  const std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(type));
  return info ? info->name : "unknown";
}

std::optional<GgmlType> parse_ggml_type(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0})
    if (upper == ggml_type_name(type)) return type;
  return std::nullopt;
}

bool can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16: case GgmlType::kQ8_0:
    case GgmlType::kQ4_0: case GgmlType::kQ4_K: case GgmlType::kQ5_K: case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

bool can_quantize(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 || type == GgmlType::kQ8_0 ||
         type == GgmlType::kQ4_0;
}

size_t ggml_row_bytes(GgmlType type, int64_t n) {
  const std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(type));
  DSPARK_ASSERT(info && n % info->block_size == 0);
  return static_cast<size_t>(n / info->block_size) * info->block_bytes;
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  DSPARK_ASSERT(can_dequantize(type));
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(read_u16(bytes + 2 * i));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(read_u16(bytes + 2 * i));
      return;
    case GgmlType::kQ8_0: dequantize_q8_0(bytes, dst, n / kQK); return;
    case GgmlType::kQ4_0: dequantize_q4_0(bytes, dst, n / kQK); return;
    case GgmlType::kQ4_K: dequantize_k4_k5(bytes, dst, n / kQKK, false); return;
    case GgmlType::kQ5_K: dequantize_k4_k5(bytes, dst, n / kQKK, true); return;
    case GgmlType::kQ6_K: dequantize_q6_k(bytes, dst, n / kQKK); return;
    default: DSPARK_ASSERT(false);
  }
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  DSPARK_ASSERT(can_quantize(type));
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) write_u16(bytes + 2 * i, f32_to_f16(src[i]));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) write_u16(bytes + 2 * i, f32_to_bf16(src[i]));
      return;
    case GgmlType::kQ8_0: quantize_q8_0(src, bytes, n / kQK); return;
    case GgmlType::kQ4_0: quantize_q4_0(src, bytes, n / kQK); return;
    default: DSPARK_ASSERT(false);
  }
}

}  // namespace dspark::model
