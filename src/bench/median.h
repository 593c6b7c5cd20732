// The median of benchmark samples: the middle value, or the mean of the two middle values for an
// even count.
#pragma once
#include <algorithm>
#include <vector>

namespace dspark::bench {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace dspark::bench
