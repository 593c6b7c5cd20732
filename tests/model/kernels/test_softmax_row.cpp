// softmax_row against a double-precision reference, for every ISA variant this CPU supports, at
// lengths on and off the SIMD widths (1, 7, 16, 17, 8192, a Qwen3 vocabulary of 151936), with
// masked (-infinity) entries and large logits.
//
// Each probability is within 2e-6 of the reference relative to itself (the polynomial exp is
// accurate to f32 rounding, the sum adds ~1e-7), and masked entries are exactly 0. A dropped tail,
// a wrong max or an unmasked entry moves some probability by far more.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/kernels/cpu_isa.h"
#include "model/kernels/kernel_test_util.h"
#include "model/kernels/softmax_row.h"

namespace dspark::kernels {
namespace {

using testing::DispatchGuard;
using testing::random_floats;

std::vector<double> reference(const std::vector<float>& x) {
  double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
  for (float v : x) max = std::max<double>(max, v);
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum += (p[i] = std::exp(double{x[i]} - max));
  for (double& v : p) v /= sum;
  return p;
}

void check_all_isas(const std::vector<float>& x) {
  DispatchGuard guard;
  const std::vector<double> want = reference(x);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    SCOPED_TRACE(std::string("isa=") + isa_name(isa) + " n=" + std::to_string(x.size()));
    std::vector<float> got(x.size(), std::nanf(""));
    softmax_row(x.data(), static_cast<int64_t>(x.size()), got.data());
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isinf(x[i])) {
        ASSERT_EQ(got[i], 0.0f) << "masked entry " << i;
        continue;
      }
      const double err = std::fabs(got[i] - want[i]) / want[i];
      worst = std::max(worst, std::isnan(err) ? 1e30 : err);
    }
    EXPECT_LT(worst, 2e-6);
  }
}

TEST(SoftmaxRow, MatchesTheReferenceAtEveryLength) {
  uint32_t seed = 1;
  for (size_t n : {1, 7, 16, 17, 8192, 151936}) check_all_isas(random_floats(n, -8.0f, 8.0f, seed++));
}

TEST(SoftmaxRow, MaskedEntriesAreExactlyZero) {
  std::vector<float> x = random_floats(1000, -5.0f, 5.0f, 11);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = -std::numeric_limits<float>::infinity();
  check_all_isas(x);
}

// Logits in the thousands overflow exp without the max subtraction.
TEST(SoftmaxRow, LargeLogitsStayFinite) { check_all_isas(random_floats(333, 1000.0f, 1010.0f, 12)); }

TEST(SoftmaxRow, InPlace) {
  std::vector<float> x = random_floats(100, -3.0f, 3.0f, 13);
  std::vector<float> out(100);
  softmax_row(x.data(), 100, out.data());
  softmax_row(x.data(), 100, x.data());
  EXPECT_EQ(x, out);
}

}  // namespace
}  // namespace dspark::kernels
