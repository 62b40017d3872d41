#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "lockstep/comm/process_group.h"

namespace lockstep::train {

// A rank's running sums for one log interval: cheap to add to every step, reduced across
// ranks (one small all_reduce) only when the interval is logged. The sums stay on the
// outputs' device, so that a GPU step does not wait for its loss to reach the host.
class MetricSums {
 public:
  void add(const torch::Tensor& output, const torch::Tensor& target, const torch::Tensor& loss);
  bool empty() const { return samples_ == 0; }
  // Sums over the ranks of `group`, as (name, value) pairs: loss, and top1/top5 for
  // classifiers. Collective: every rank of the group must call it at the same point.
  std::vector<std::pair<std::string, double>> reduce_across_ranks(const ProcessGroup& group,
                                                                  double& global_samples) const;
  void clear() { *this = MetricSums(); }

 private:
  // loss × examples, top-1 and top-5 hits: float64 (exact for the counts), on the device;
  // undefined until the first add().
  torch::Tensor sums_;
  double samples_ = 0;
  bool classifier_ = false;
};

}  // namespace lockstep::train
