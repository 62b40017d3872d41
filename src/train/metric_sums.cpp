#include "train/metric_sums.h"

#include <algorithm>

#include "lockstep/comm/collectives.h"

namespace lockstep::train {
namespace {

// How many rows of `output` have their target among their k highest scores, as a tensor.
torch::Tensor correct_in_top(const torch::Tensor& output, const torch::Tensor& target, int64_t k) {
  const auto top = std::get<1>(output.topk(std::min(k, output.size(1)), 1));
  return top.eq(target.unsqueeze(1)).any(1).sum();
}

}  // namespace

void MetricSums::add(const torch::Tensor& output, const torch::Tensor& target, const torch::Tensor& loss) {
  const double n = static_cast<double>(target.size(0));
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(loss.device());
  if (!sums_.defined()) sums_ = torch::zeros({3}, options);
  samples_ += n;
  classifier_ = output.dim() == 2 && target.dim() == 1 && target.scalar_type() == torch::kInt64;
  const auto hits = [&](int64_t k) {
    return classifier_ ? correct_in_top(output, target, k).to(torch::kFloat64) : torch::zeros({}, options);
  };
  sums_ += torch::stack({loss.detach().to(torch::kFloat64) * n, hits(1), hits(5)});
}

std::vector<std::pair<std::string, double>> MetricSums::reduce_across_ranks(const ProcessGroup& group,
                                                                            double& global_samples) const {
  auto sums = torch::cat(
      {sums_.defined() ? sums_.cpu() : torch::zeros({3}, torch::kFloat64), torch::tensor({samples_}, torch::kFloat64)});
  lockstep::all_reduce(sums, ReduceOp::Sum, group);
  const auto* s = sums.data_ptr<double>();
  global_samples = s[3];
  const double n = std::max(s[3], 1.0);
  std::vector<std::pair<std::string, double>> values = {{"loss", s[0] / n}};
  if (classifier_) {
    values.emplace_back("top1", s[1] / n);
    values.emplace_back("top5", s[2] / n);
  }
  return values;
}

}  // namespace lockstep::train
