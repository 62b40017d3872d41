#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <vector>

#include "comm/calls/call.h"

namespace gloo::rendezvous {
class Store;
}

namespace lockstep {

/// How a group's ranks tell each other, after a failure, what each was doing: through a
/// store, which usually still works when the data path has failed. It names the collective
/// every rank was in, or the ranks that never reported, and says when the calls differed.
class FailureReports {
 public:
  /// `store` holds this group's reports only; `group_ranks[r]` is how rank r is named
  /// (empty: as itself).
  FailureReports(std::shared_ptr<gloo::rendezvous::Store> store, int rank, int size, std::vector<int> group_ranks = {});

  /// Reports this rank's `call` and waits briefly for the others': a MismatchError where the
  /// calls differ, a TimeoutError where `elapsed` reached `timeout`, else an Error.
  std::exception_ptr explain(const Call& call, const std::exception& failure,
                             std::chrono::steady_clock::duration elapsed, std::chrono::milliseconds timeout) const;

 private:
  int named(int rank) const;

  std::shared_ptr<gloo::rendezvous::Store> store_;
  int rank_;
  int size_;
  std::vector<int> group_ranks_;
};

}  // namespace lockstep
