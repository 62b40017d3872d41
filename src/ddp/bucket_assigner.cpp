#include "ddp/bucket_assigner.h"

#include <algorithm>
#include <map>

namespace lockstep {

std::vector<std::vector<size_t>> assign_buckets(const std::vector<ParameterSize>& in_order, int64_t first_cap_bytes,
                                                int64_t cap_bytes) {
  struct Open {
    std::vector<size_t> members;
    int64_t bytes = 0;
    bool first = true;
  };
  std::map<c10::ScalarType, Open> open;
  std::vector<std::vector<size_t>> closed;
  for (const auto& p : in_order) {
    Open& bucket = open[p.dtype];
    bucket.members.push_back(p.index);
    bucket.bytes += p.bytes;
    if (bucket.bytes >= (bucket.first ? first_cap_bytes : cap_bytes)) {
      closed.push_back(std::move(bucket.members));
      bucket = Open{{}, 0, false};
    }
  }
  // What is left open closes at the end, in the order of its earliest member.
  std::vector<std::vector<size_t>> leftovers;
  for (auto& entry : open) {
    if (!entry.second.members.empty()) leftovers.push_back(std::move(entry.second.members));
  }
  auto position = [&](size_t index) {
    for (size_t i = 0; i < in_order.size(); ++i) {
      if (in_order[i].index == index) return i;
    }
    return in_order.size();
  };
  std::sort(leftovers.begin(), leftovers.end(),
            [&](const auto& a, const auto& b) { return position(a.front()) < position(b.front()); });
  closed.insert(closed.end(), leftovers.begin(), leftovers.end());
  return closed;
}

}  // namespace lockstep
