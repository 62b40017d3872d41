#pragma once

#include <deque>
#include <string>
#include <vector>

#include "lockstep/comm/process_group.h"
#include "timeline/straggler.h"

namespace lockstep::train {

// Which rank keeps the others waiting, step by step: every rank shares its split of each step
// (waiting for data, computing, waiting for gradients) in one small all_gather, so that all
// of them see the same thing. When the last steps have a straggler (timeline/straggler.h,
// the summary's definition too), there is one notice to show.
class StragglerWatch {
 public:
  /// Every rank of `group` constructs it together (it learns the ranks' host names).
  explicit StragglerWatch(ProcessGroup group);

  /// This rank's step, in seconds; every rank calls it after each step.
  void add_step(double data, double compute, double comm);
  /// "rank 1 on HOST is 40% behind: waiting for data" (or ": compute") the first time it
  /// holds; else "".
  std::string take_notice();
  /// Per step and rank, the mean milliseconds of data wait, compute and gradient wait since
  /// the last call, on every rank alike.
  std::vector<std::pair<std::string, double>> interval_means();

 private:
  ProcessGroup group_;
  std::vector<std::string> hosts_;
  std::deque<timeline::SlowestRank> window_;
  bool noticed_ = false;
  std::string notice_;
  double sums_[3] = {0, 0, 0};
  int64_t counted_ = 0;  // rank-steps in sums_
};

}  // namespace lockstep::train
