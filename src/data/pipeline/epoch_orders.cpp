#include "data/pipeline/epoch_orders.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "data/pipeline/portable_random.h"

namespace lockstep::data {

std::vector<size_t> epoch_order(size_t size, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<size_t> order(size);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!shuffle || size < 2) return order;
  std::mt19937_64 engine(mix_seed({seed, static_cast<uint64_t>(epoch)}));
  for (size_t i = size - 1; i > 0; --i) {
    std::swap(order[i], order[draw_below(engine, i + 1)]);
  }
  return order;
}

std::vector<size_t> shuffled_in_windows(std::vector<size_t> walk, size_t window, uint64_t seed) {
  std::mt19937_64 engine(seed);
  window = std::max<size_t>(window, 1);
  for (size_t start = 0; start < walk.size(); start += window) {
    const size_t end = std::min(start + window, walk.size());
    for (size_t i = end - 1; i > start; --i) std::swap(walk[i], walk[start + draw_below(engine, i - start + 1)]);
  }
  return walk;
}

}  // namespace lockstep::data
