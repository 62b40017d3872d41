#include "train/straggler_watch.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"

namespace lockstep::train {
namespace {

constexpr size_t kWindow = 10;     // steps looked back on
constexpr double kBehind = 0.2;    // slower than the others' median by more than this share
constexpr int64_t kHostBytes = 64;

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

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
  const int n = static_cast<int>(parts.size());
  std::vector<double> busy, datas, computes;
  for (const auto& p : parts) {
    const double* v = p.data_ptr<double>();
    busy.push_back(v[0] + v[1]);
    datas.push_back(v[0]);
    computes.push_back(v[1]);
    for (int k = 0; k < 3; ++k) sums_[k] += v[k];
    ++counted_;
  }
  if (n < 2) return;
  const int slowest = static_cast<int>(std::max_element(busy.begin(), busy.end()) - busy.begin());
  auto others = [&](const std::vector<double>& values) {
    std::vector<double> rest;
    for (int r = 0; r < n; ++r) {
      if (r != slowest) rest.push_back(values[r]);
    }
    return median_of(rest);
  };
  const double usual = others(busy);
  window_.push_back({slowest, usual > 0 ? busy[slowest] / usual - 1 : 0, datas[slowest] - others(datas),
                     computes[slowest] - others(computes)});
  if (window_.size() > kWindow) window_.pop_front();
  if (noticed_ || window_.size() < kWindow) return;

  std::map<int, std::vector<const Slowest*>> behind;
  for (const auto& s : window_) {
    if (s.behind > kBehind) behind[s.rank].push_back(&s);
  }
  for (const auto& [rank, steps] : behind) {
    if (steps.size() * 2 <= kWindow) continue;
    std::vector<double> shares;
    double data = 0, compute = 0;
    for (const Slowest* s : steps) {
      shares.push_back(s->behind);
      data += s->data_excess;
      compute += s->compute_excess;
    }
    noticed_ = true;
    notice_ = "rank " + std::to_string(group_.ranks().at(rank)) + " on " + hosts_[rank] + " is " +
              std::to_string(static_cast<int>(100 * median_of(shares) + 0.5)) + "% behind: " +
              (data >= compute ? "waiting for data" : "compute");
    return;
  }
}

std::string StragglerWatch::take_notice() {
  std::string notice;
  notice.swap(notice_);
  return notice;
}

std::vector<std::pair<std::string, double>> StragglerWatch::interval_means() {
  const double n = counted_ > 0 ? static_cast<double>(counted_) : 1;
  std::vector<std::pair<std::string, double>> means = {
      {"step_data_ms", 1000 * sums_[0] / n}, {"step_compute_ms", 1000 * sums_[1] / n}, {"step_comm_ms", 1000 * sums_[2] / n}};
  std::fill(std::begin(sums_), std::end(sums_), 0.0);
  counted_ = 0;
  return means;
}

}  // namespace lockstep::train
