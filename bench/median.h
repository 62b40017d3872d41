#pragma once

// The statistic every benchmark reports: the machine is shared and noisy, and a median
// ignores the odd slow run.
#include <algorithm>
#include <vector>

namespace lockstep::bench {

/// The middle value (the upper one of an even count).
inline double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace lockstep::bench
