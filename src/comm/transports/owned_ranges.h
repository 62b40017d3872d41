#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "lockstep/comm/types.h"

namespace lockstep {

/// Calls `segment(begin, end, owner)` for the pieces of elements [begin, end) of a
/// reduce_to_owners, in order, each as long as one owner's: kEveryRank throughout where
/// `ranges` is null (an all_reduce).
template <typename Segment>
void for_each_owned(const std::vector<OwnedRange>* ranges, size_t begin, size_t end, Segment&& segment) {
  if (begin >= end) return;
  if (ranges == nullptr) return segment(begin, end, kEveryRank);
  auto range = std::upper_bound(ranges->begin(), ranges->end(), begin,
                                [](size_t at, const OwnedRange& r) { return at < static_cast<size_t>(r.end); });
  size_t from = begin;
  int owner = kEveryRank;
  for (size_t at = begin; at < end && range != ranges->end(); ++range) {
    const size_t stop = std::min(end, static_cast<size_t>(range->end));
    if (at > from && range->owner != owner) {
      segment(from, at, owner);
      from = at;
    }
    owner = range->owner;
    at = stop;
  }
  segment(from, end, owner);
}

/// Whether `rank` needs the sum of elements owned by `owner`.
inline bool needs(int rank, int owner) { return owner == kEveryRank || owner == rank; }

}  // namespace lockstep
