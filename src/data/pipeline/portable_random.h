#pragma once

// Draws from std::mt19937_64 that give the same numbers with every standard library.
// The engine's output is fixed by the C++ standard, but std::uniform_int_distribution and
// std::uniform_real_distribution are not: libstdc++, libc++ and MSVC map the same engine
// output to different values. Shuffles and augmentation must match on every machine of a
// job, so lockstep maps engine output to numbers itself.

#include <cstdint>
#include <initializer_list>
#include <random>

namespace lockstep::data {

/// A uniform integer in [0, bound), unbiased: rejects the few engine outputs below
/// 2^64 mod bound, so every remainder is equally likely. `bound` must be at least 1.
inline uint64_t draw_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t reject_below = (0 - bound) % bound;  // 2^64 mod bound
  uint64_t x = engine();
  while (x < reject_below) x = engine();
  return x % bound;
}

/// A uniform double in [0, 1) from the top 53 bits of one engine output.
inline double draw_unit(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

/// A uniform double in [low, high).
inline double draw_between(std::mt19937_64& engine, double low, double high) {
  return low + (high - low) * draw_unit(engine);
}

/// One seed from several numbers (seed, epoch, position...), by splitmix64 steps, so that
/// nearby inputs give unrelated engine states.
inline uint64_t mix_seed(std::initializer_list<uint64_t> parts) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (uint64_t part : parts) {
    uint64_t z = (state += part + 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    state = z ^ (z >> 31);
  }
  return state;
}

}  // namespace lockstep::data
