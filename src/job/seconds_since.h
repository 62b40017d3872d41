#pragma once

#include <chrono>

namespace lockstep {

/// Seconds on the steady clock from `start` to now: how long a phase took.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace lockstep
