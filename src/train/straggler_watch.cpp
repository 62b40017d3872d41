#include "train/straggler_watch.h"

#include <unistd.h>

#include <cstring>

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"

namespace lockstep::train {
namespace {

constexpr size_t kWindow = 10;  // steps looked back on
constexpr int64_t kHostBytes = 64;

}  // namespace

StragglerWatch::StragglerWatch(ProcessGroup group) : group_(std::move(group)) {
  at::Tensor mine = at::zeros({kHostBytes}, at::kByte);
  char name[kHostBytes] = {};
  if (gethostname(name, kHostBytes - 1) != 0) std::strcpy(name, "unknown");
  std::memcpy(mine.data_ptr(), name, std::strlen(name));
  for (const auto& part : all_gather(mine, group_)) hosts_.emplace_back(static_cast<const char*>(part.data_ptr()));
}

void StragglerWatch::add_step(double data, double compute, double comm) {
  const auto parts = all_gather(at::tensor({data, compute, comm}, at::kDouble), group_);
  std::vector<timeline::StepTimes> steps;
  for (const auto& p : parts) {
    const double* v = p.data_ptr<double>();
    steps.push_back({v[0], v[1]});
    for (int k = 0; k < 3; ++k) sums_[k] += v[k];
    ++counted_;
  }
  if (steps.size() < 2) return;
  window_.push_back(timeline::slowest_of(steps));
  if (window_.size() > kWindow) window_.pop_front();
  if (noticed_ || window_.size() < kWindow) return;
  const auto straggler = timeline::straggler_of({window_.begin(), window_.end()});
  if (!straggler) return;
  noticed_ = true;
  notice_ = "rank " + std::to_string(group_.ranks().at(straggler->rank)) + " on " + hosts_[straggler->rank] + " is " +
            std::to_string(static_cast<int>(100 * straggler->behind + 0.5)) +
            "% behind: " + (straggler->reason == "data" ? "waiting for data" : "compute");
}

std::string StragglerWatch::take_notice() {
  std::string notice;
  notice.swap(notice_);
  return notice;
}

std::vector<std::pair<std::string, double>> StragglerWatch::interval_means() {
  const double n = counted_ > 0 ? static_cast<double>(counted_) : 1;
  std::vector<std::pair<std::string, double>> means = {{"step_data_ms", 1000 * sums_[0] / n},
                                                       {"step_compute_ms", 1000 * sums_[1] / n},
                                                       {"step_comm_ms", 1000 * sums_[2] / n}};
  std::fill(std::begin(sums_), std::end(sums_), 0.0);
  counted_ = 0;
  return means;
}

}  // namespace lockstep::train
