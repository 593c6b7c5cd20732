// linear_small in portable C++ (compiled without ISA flags): the fallback for CPUs without AVX2
// and the reference the SIMD variants are tested against besides the double-precision one.
#include "model/kernels/bf16.h"
#include "model/kernels/linear_small_variants.h"
#include "model/safetensors.h"

namespace dspark::kernels::linear_small_detail {
namespace {

// How one weight element is stored and widened (exactly) to f32.
struct F32Weights {
  using Elem = float;
  static float load(const float* w) { return *w; }
};
struct Bf16Weights {
  using Elem = uint16_t;
  static float load(const uint16_t* w) { return bf16_to_f32(*w); }
};
struct F16Weights {
  using Elem = uint16_t;
  static float load(const uint16_t* w) { return model::f16_to_f32(*w); }
};

// y[j, r] = x[j, :] . w[r, :] for up to 4 rows of x and 4 weight rows: 16 independent sums, so
// each loaded weight is used for every row of x.
template <class Weights>
void dot_tile(const float* x,  // [rows, k]
              int rows,
              const typename Weights::Elem* w,  // [cols, k]
              int cols, int64_t k,
              float* y,  // [rows, y_stride]
              int64_t y_stride, bool accumulate) {
  constexpr int kMax = 4;
  float acc[kMax][kMax] = {};
  for (int64_t i = 0; i < k; ++i) {
    float wv[kMax];
    for (int r = 0; r < cols; ++r) wv[r] = Weights::load(w + r * k + i);
    for (int j = 0; j < rows; ++j) {
      const float xv = x[j * k + i];
      for (int r = 0; r < cols; ++r) acc[j][r] += xv * wv[r];
    }
  }
  for (int j = 0; j < rows; ++j) {
    for (int r = 0; r < cols; ++r) y[j * y_stride + r] = accumulate ? y[j * y_stride + r] + acc[j][r] : acc[j][r];
  }
}

template <class Weights>
struct GenericTiles {
  static constexpr int kColumns = 4;
  static constexpr int kMaxRows = 4;
  static void tile(const Problem& p, int64_t row, int rows, int64_t col, int cols) {
    dot_tile<Weights>(p.x + row * p.k, rows, static_cast<const typename Weights::Elem*>(p.w) + col * p.k, cols, p.k,
             p.y + row * p.ldy + col, p.ldy, p.accumulate);
  }
};

}  // namespace

void columns_generic(const Problem& p, int64_t n_begin, int64_t n_end) {
  switch (p.w_dtype) {
    case WeightDType::kF32: return for_each_tile<GenericTiles<F32Weights>>(p, n_begin, n_end);
    case WeightDType::kBF16: return for_each_tile<GenericTiles<Bf16Weights>>(p, n_begin, n_end);
    case WeightDType::kF16: return for_each_tile<GenericTiles<F16Weights>>(p, n_begin, n_end);
  }
}

}  // namespace dspark::kernels::linear_small_detail
