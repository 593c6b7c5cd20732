// Goodness-of-fit helpers for the statistical tests: Pearson's chi-square against exact expected
// probabilities, with cells of small expectation pooled, and its p-value.
#pragma once
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <vector>

namespace dspark::test {

// Regularized upper incomplete gamma Q(a, x) (Numerical-Recipes-style series / continued fraction).
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double gln = std::lgamma(a);
  if (x < a + 1) {  // series for P
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 10000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;  // continued fraction for Q (Lentz)
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

struct ChiSquare {
  double statistic = 0;
  int64_t dof = 0;
  double p_value = 1;
};

// counts[i] observed, probs[i] exact (summing to 1), n = sum of counts. Cells with expected count
// below min_expected are pooled into one cell (kept if its pooled expectation is >= min_expected).
inline ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs,
                            double min_expected = 5.0) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  ChiSquare r;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0 && probs[i] <= 0) {  // observed what has probability zero
      r.statistic = INFINITY;
      r.p_value = 0;
      return r;
    }
  double pooled_expected = 0, pooled_observed = 0;
  int64_t cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * static_cast<double>(n);
    if (e < min_expected) {
      pooled_expected += e;
      pooled_observed += static_cast<double>(counts[i]);
      continue;
    }
    r.statistic += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  if (pooled_expected >= min_expected) {
    r.statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  r.dof = std::max<int64_t>(1, cells - 1);
  r.p_value = gamma_q(0.5 * static_cast<double>(r.dof), 0.5 * r.statistic);
  return r;
}

}  // namespace dspark::test
