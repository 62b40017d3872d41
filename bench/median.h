#pragma once

// The statistic every benchmark reports: the machine is shared and noisy, and a median
// ignores the odd slow run.
#include <algorithm>
#include <functional>
#include <vector>

namespace lockstep::bench {

/// The middle value (the upper one of an even count).
inline double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

/// The median over `pairs` pairs of `a()`'s time over `b()`'s, each a window of work timed in
/// seconds, run in ABBA order so that the machine's drift hits both alike.
inline double median_paired_ratio(int pairs, const std::function<double()>& a, const std::function<double()>& b) {
  std::vector<double> ratios;
  for (int pair = 0; pair < pairs; ++pair) {
    double first = 0, second = 0;
    if (pair % 2 == 0) {
      first = a(), second = b();
    } else {
      second = b(), first = a();
    }
    ratios.push_back(first / second);
  }
  return median(ratios);
}

}  // namespace lockstep::bench
