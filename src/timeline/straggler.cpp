#include "timeline/straggler.h"

#include <algorithm>
#include <map>

namespace lockstep::timeline {
namespace {

constexpr double kBehind = 0.2;  // slower than the others' median by more than this share

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

SlowestRank slowest_of(const std::vector<StepTimes>& ranks) {
  SlowestRank slowest;
  if (ranks.size() < 2) return slowest;
  const auto busy = [](const StepTimes& t) { return t.data + t.compute; };
  slowest.rank =
      static_cast<int>(std::max_element(ranks.begin(), ranks.end(),
                                        [&](const StepTimes& a, const StepTimes& b) { return busy(a) < busy(b); }) -
                       ranks.begin());
  std::vector<double> others_busy, others_data, others_compute;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (static_cast<int>(r) == slowest.rank) continue;
    others_busy.push_back(busy(ranks[r]));
    others_data.push_back(ranks[r].data);
    others_compute.push_back(ranks[r].compute);
  }
  const StepTimes& mine = ranks[slowest.rank];
  const double usual = median_of(others_busy);
  slowest.behind = usual > 0 ? busy(mine) / usual - 1 : 0;
  slowest.data_excess = mine.data - median_of(others_data);
  slowest.compute_excess = mine.compute - median_of(others_compute);
  return slowest;
}

std::optional<Straggler> straggler_of(const std::vector<SlowestRank>& steps) {
  std::map<int, std::vector<const SlowestRank*>> behind;
  for (const auto& s : steps) {
    if (s.rank >= 0 && s.behind > kBehind) behind[s.rank].push_back(&s);
  }
  for (const auto& [rank, its] : behind) {
    if (its.size() * 2 <= steps.size()) continue;
    std::vector<double> shares;
    double data = 0, compute = 0;
    for (const SlowestRank* s : its) {
      shares.push_back(s->behind);
      data += s->data_excess;
      compute += s->compute_excess;
    }
    return Straggler{rank, median_of(shares), static_cast<double>(its.size()) / static_cast<double>(steps.size()),
                     reason_of(data, compute)};
  }
  return std::nullopt;
}

const char* reason_of(double data_excess, double compute_excess) {
  return data_excess >= compute_excess ? "data" : "compute";
}

}  // namespace lockstep::timeline
