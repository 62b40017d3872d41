#include "cuda_checks.h"

#include <cmath>
#include <vector>

namespace lockstep::testing {

using torch::Tensor;

bool equal_on_host(const Tensor& gpu, const Tensor& expected) { return gpu.cpu().to(torch::kDouble).equal(expected); }

// Avg where NCCL averages: it multiplies each rank's value by 1/n, rounded, before summing,
// so on 3 ranks about one element in seven ends an ulp from the exact mean (docs/GPU.md).
bool mean_on_host(const Tensor& gpu, const Tensor& expected) {
  return torch::allclose(gpu.cpu().to(torch::kDouble), expected, /*rtol=*/1e-6, /*atol=*/0);
}

std::string wrong_collectives(const ProcessGroup& group, int64_t length, torch::Device device) {
  std::string wrong;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) wrong += what + "; ";
  };
  const auto on = [device](torch::ScalarType dtype = torch::kFloat) {
    return torch::TensorOptions().dtype(dtype).device(device);
  };
  const int r = group.rank(), n = group.size();
  const double sum_ranks = n * (n - 1) / 2.0;
  const Tensor base = torch::arange(length, torch::kDouble).fmod(7);
  for (auto dtype :
       {torch::kFloat, torch::kDouble, torch::kInt, torch::kLong, torch::kHalf, torch::kBFloat16, torch::kByte}) {
    const std::string name = c10::toString(dtype);
    Tensor t = base.add(r).to(on(dtype));
    all_reduce(t, ReduceOp::Sum, group);
    check(equal_on_host(t, base * n + sum_ranks), "all_reduce " + name);
    Tensor a = base.add(r).to(on(dtype));
    all_reduce_async(a, ReduceOp::Sum, group).wait();
    check(equal_on_host(a, base * n + sum_ranks), "all_reduce_async " + name);
    Tensor m = base.add(r).to(on(dtype));
    all_reduce(m, ReduceOp::Max, group);
    check(equal_on_host(m, base + (n - 1)), "all_reduce Max " + name);
    Tensor b = torch::full({length}, r == n - 1 ? 42.0 : 1.0, on(dtype));
    broadcast_async(b, n - 1, group).wait();
    check(equal_on_host(b, torch::full({length}, 42.0, torch::kDouble)), "broadcast_async " + name);
    const auto parts = all_gather(base.add(r).to(on(dtype)), group);
    for (int q = 0; q < n && q < static_cast<int>(parts.size()); ++q) {
      check(parts[q].is_cuda() && equal_on_host(parts[q], base + q),
            "all_gather " + name + " part " + std::to_string(q));
    }
  }
  Tensor avg = torch::full({length}, 2.0 * r, on());
  all_reduce(avg, ReduceOp::Avg, group);
  check(mean_on_host(avg, torch::full({length}, n - 1.0, torch::kDouble)), "all_reduce Avg");

  Tensor mn = torch::full({length}, 5.0 + r, on(torch::kLong));
  all_reduce_async(mn, ReduceOp::Min, group).wait();
  check(equal_on_host(mn, torch::full({length}, 5.0, torch::kDouble)), "all_reduce_async Min");

  Tensor b = torch::full({length}, r == 0 ? 7.0 : -1.0, on());
  broadcast(b, 0, group);
  check(equal_on_host(b, torch::full({length}, 7.0, torch::kDouble)), "broadcast");

  Tensor red = torch::full({length}, r + 1.0, on());
  reduce(red, 0, ReduceOp::Product, group);
  double factorial = 1;
  for (int q = 1; q <= n; ++q) factorial *= q;
  check(equal_on_host(red, torch::full({length}, r == 0 ? factorial : r + 1.0, torch::kDouble)), "reduce Product");

  Tensor red_async = torch::full({length}, r + 1.0, on(torch::kInt));
  reduce_async(red_async, n - 1, ReduceOp::Sum, group).wait();
  check(equal_on_host(red_async, torch::full({length}, r == n - 1 ? sum_ranks + n : r + 1.0, torch::kDouble)),
        "reduce_async Sum");

  const auto gathered = all_gather_async(torch::full({length}, r * 10.0, on()), group).result();
  check(static_cast<int>(gathered.size()) == n, "all_gather_async size");
  for (int q = 0; q < n && q < static_cast<int>(gathered.size()); ++q) {
    check(gathered[q].is_cuda() && equal_on_host(gathered[q], torch::full({length}, q * 10.0, torch::kDouble)),
          "all_gather_async part " + std::to_string(q));
  }
  const Tensor input = torch::arange(n * length, torch::kDouble).add(r);
  const Tensor expected_slice = input.slice(0, r * length, (r + 1) * length).sub(r) * n + sum_ranks;
  const Tensor scattered = reduce_scatter_async(input.to(on(torch::kDouble)), ReduceOp::Sum, group).result().at(0);
  check(scattered.is_cuda() && equal_on_host(scattered, expected_slice), "reduce_scatter_async");
  const Tensor scattered_avg = reduce_scatter(input.to(on(torch::kDouble)), ReduceOp::Avg, group);
  check(scattered_avg.is_cuda() && mean_on_host(scattered_avg, expected_slice / n), "reduce_scatter Avg");

  std::vector<Tensor> many{torch::full({3}, r + 0.0, on()), torch::full({length}, r, on(torch::kLong)),
                           torch::full({length}, r + 1.0, on())};
  all_reduce(many, ReduceOp::Sum, group);
  check(equal_on_host(many[0], torch::full({3}, sum_ranks, torch::kDouble)) &&
            equal_on_host(many[1], torch::full({length}, sum_ranks, torch::kDouble)) &&
            equal_on_host(many[2], torch::full({length}, sum_ranks + n, torch::kDouble)),
        "coalesced all_reduce");
  std::vector<Tensor> many_async{torch::full({length}, r == n - 1 ? 3.0 : 0.0, on()),
                                 torch::full({2}, r == n - 1 ? 4 : 0, on(torch::kInt))};
  all_reduce_async(many_async, ReduceOp::Max, group).wait();
  check(equal_on_host(many_async[0], torch::full({length}, 3.0, torch::kDouble)) &&
            equal_on_host(many_async[1], torch::full({2}, 4.0, torch::kDouble)),
        "coalesced all_reduce_async Max");
  // Over NCCL one group: the long Avg, a Sum divided afterwards, must read the sum made.
  std::vector<Tensor> many_avg{torch::full({length}, 3.0 * r, on()), torch::full({length}, 3 * r, on(torch::kLong))};
  all_reduce(many_avg, ReduceOp::Avg, group);
  check(mean_on_host(many_avg[0], torch::full({length}, 3.0 * (n - 1) / 2, torch::kDouble)) &&
            equal_on_host(many_avg[1], torch::full({length}, std::floor(3.0 * (n - 1) / 2), torch::kDouble)),
        "coalesced all_reduce Avg of float32 and int64");
  std::vector<Tensor> broadcast_many{torch::full({length}, r == 0 ? 2.0 : 0.0, on()),
                                     torch::full({4}, r == 0 ? 9 : 0, on(torch::kByte))};
  broadcast(broadcast_many, 0, group);
  check(equal_on_host(broadcast_many[0], torch::full({length}, 2.0, torch::kDouble)) &&
            equal_on_host(broadcast_many[1], torch::full({4}, 9.0, torch::kDouble)),
        "coalesced broadcast");
  return wrong;
}

void queue_slow_kernels(torch::Device device) {
  Tensor x = torch::rand({4096, 4096}, torch::TensorOptions().device(device));
  for (int i = 0; i < 24; ++i) x = torch::mm(x, x).div_(4096);
}

std::string wrong_stream_order(const ProcessGroup& group, torch::Device device) {
  const int r = group.rank(), n = group.size();
  Tensor t = torch::zeros({1000}, torch::TensorOptions().device(device));
  queue_slow_kernels(device);
  t.fill_(r + 1);  // queued behind the slow kernels: the collective must see it
  Work work = all_reduce_async(t, ReduceOp::Sum, group);
  work.wait();
  t.mul_(2);  // queued after wait(): must see the reduced values
  const double want = n * (n + 1.0);
  const double got = t.cpu()[0].item<double>();
  return got == want ? ""
                     : "after slow kernels and wait(): got " + std::to_string(got) + ", want " + std::to_string(want);
}

}  // namespace lockstep::testing
