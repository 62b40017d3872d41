#include "comm/sixteen_bit_means.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "lockstep/comm/collectives.h"

namespace lockstep::testing {
namespace {

constexpr int64_t kBlock = 1 << 16;

double largest(at::ScalarType dtype) { return dtype == at::kHalf ? 65504.0 : 3.3895313892515355e38; }

}  // namespace

at::Tensor overflowing_input(int r, int n, int64_t numel, at::ScalarType dtype) {
  // Large tensors repeat a block, whose mean the checks then work out once.
  if (numel > kBlock) return overflowing_input(r, n, kBlock, dtype).repeat({numel / kBlock + 1}).narrow(0, 0, numel);
  const double top = largest(dtype);
  at::Tensor magnitude = at::rand({numel}, at::detail::createCPUGenerator(1000 + r), at::kDouble);
  magnitude = magnitude * (0.999 * top - 1.01 * top / n) + 1.01 * top / n;
  const at::Tensor sign = 1 - 2 * at::remainder(at::arange(numel, at::kDouble), 2);
  at::Tensor values = (magnitude * sign).to(dtype);
  if (dtype == at::kHalf && n == 3) {
    // Element 0: summed in float32 these round to 60024, so the mean to the tie 20008 and
    // then to the even 20000; exactly, the mean is just above the tie: 20016.
    const double corner[] = {65504, -5480, std::ldexp(1.0, -24)};
    values[0] = corner[r];
  }
  return values;
}

// Exact float64 arithmetic: n times a 16-bit value is exact, and so are the sums of
// overflowing_input's values. ATen's own float64 to 16-bit conversion goes through float32
// and may be one off, so its neighbours are tried too.
at::Tensor correctly_rounded_mean(const at::Tensor& sum, int n, at::ScalarType dtype) {
  at::Tensor best = (sum / n).to(dtype);
  at::Tensor best_error = (best.to(at::kDouble) * n - sum).abs();
  const at::Tensor guess_bits = best.view(at::kShort).clone();
  for (const int step : {-1, 1}) {
    const at::Tensor bits = guess_bits + step;
    const at::Tensor candidate = bits.view(dtype);
    const at::Tensor error = (candidate.to(at::kDouble) * n - sum).abs();
    const at::Tensor even = at::bitwise_and(bits, 1).eq(0);
    const at::Tensor better = error.lt(best_error).logical_or(error.eq(best_error).logical_and(even));
    best = at::where(better, candidate, best);
    best_error = at::where(better, error, best_error);
  }
  return best;
}

namespace {

class Checks {
 public:
  void expect_bits(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
    if (got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() &&
        got.view(at::kShort).equal(want.view(at::kShort))) {
      return;
    }
    const at::Tensor differ = got.sizes() == want.sizes() ? got.view(at::kShort).ne(want.view(at::kShort)).nonzero()
                                                          : at::zeros({1, 1}, at::kLong);
    const int64_t i = differ.numel() > 0 ? differ[0][0].item<int64_t>() : 0;
    failures.push_back(what + " is wrong: element " + std::to_string(i) + " is " +
                       std::to_string(got.flatten()[i].item<double>()) + ", not " +
                       std::to_string(want.flatten()[i].item<double>()));
  }
  void expect(bool holds, const std::string& what) {
    if (!holds) failures.push_back(what);
  }
  std::vector<std::string> failures;
};

void check_dtype(const ProcessGroup& group, at::ScalarType dtype, int64_t numel, Checks& checks) {
  const int r = group.rank(), n = group.size();
  const std::string of = std::string(c10::toString(dtype)) + ", " + std::to_string(numel) + " elements";
  const at::Tensor mine = overflowing_input(r, n, numel, dtype);
  const int64_t block = std::min(numel, kBlock);
  at::Tensor exact_sum = at::zeros({block}, at::kDouble);
  for (int q = 0; q < n; ++q) exact_sum += overflowing_input(q, n, block, dtype).to(at::kDouble);
  const at::Tensor want = correctly_rounded_mean(exact_sum, n, dtype).repeat({numel / block + 1}).narrow(0, 0, numel);

  at::Tensor t = mine.clone();
  all_reduce(t, ReduceOp::Avg, group);
  checks.expect_bits(t, want, "all_reduce(Avg, " + of + ")");

  at::Tensor a = mine.clone();
  all_reduce_async(a, ReduceOp::Avg, group).wait();
  checks.expect_bits(a, want, "all_reduce_async(Avg, " + of + ")");

  std::vector<at::Tensor> coalesced = {mine.clone(), at::full({5}, r + 1.0, at::kFloat)};
  all_reduce(coalesced, ReduceOp::Avg, group);
  checks.expect_bits(coalesced[0], want, "coalesced all_reduce(Avg, " + of + ")");
  checks.expect(coalesced[1].equal(at::full({5}, (n + 1) / 2.0, at::kFloat)), "the float32 tensor beside it is wrong");

  at::Tensor rooted = mine.clone();
  reduce(rooted, n - 1, ReduceOp::Avg, group);
  checks.expect_bits(rooted, r == n - 1 ? want : mine, "reduce(Avg to the last rank, " + of + ")");

  const int64_t rows = numel / n;
  const at::Tensor scattered = reduce_scatter(mine.narrow(0, 0, rows * n).view({n, rows}), ReduceOp::Avg, group);
  checks.expect_bits(scattered, want.narrow(0, 0, rows * n).view({n, rows}).narrow(0, r, 1),
                     "reduce_scatter(Avg, " + of + ")");

  at::Tensor shared = empty_shared({numel}, dtype, group);
  shared.copy_(mine);
  all_reduce(shared, ReduceOp::Avg, group);
  checks.expect_bits(shared, want, "all_reduce(Avg) of an empty_shared tensor (" + of + ")");

  at::Tensor summed = mine.clone();
  all_reduce(summed, ReduceOp::Sum, group);
  checks.expect(summed.narrow(0, 1, block - 1).isinf().all().item<bool>(),
                "all_reduce(Sum, " + of + ") did not overflow");
}

}  // namespace

std::vector<std::string> check_16_bit_means(const ProcessGroup& group) {
  Checks checks;
  for (const at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    for (const int64_t bytes : {int64_t{4} << 10, int64_t{4} << 20}) check_dtype(group, dtype, bytes / 2, checks);
  }
  return checks.failures;
}

}  // namespace lockstep::testing
