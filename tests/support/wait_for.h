#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace lockstep::testing {

// Polls `done` every 20 ms until it holds (true) or `limit` has passed (false).
inline bool wait_for(const std::function<bool()>& done, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace lockstep::testing
