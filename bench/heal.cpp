// How fast live recovery heals a member: the state of the member furthest on sent to the
// others, as `lockstep train --recovery live` does after a regroup (synchronize of the
// module, then of the optimizer):
//
//   bench/heal
//
// ResNet-50 (ImageNet shape, 25.6 M parameters) with Adam after one step (its moments
// filled), on 2 worker processes of this machine: rank 0 holds the state, rank 1 a fresh
// model and an empty optimizer, as a replacement does. Five heals each over shared memory
// and over Gloo on loopback (LOCKSTEP_SHM=0); the bytes sent over the median time.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/comm/collectives.h"
#include "lockstep/comm/init.h"
#include "lockstep/ddp/synchronize.h"
#include "lockstep/train/models.h"
#include "median.h"
#include "run_world.h"

namespace {

using lockstep::bench::median;
using Clock = std::chrono::steady_clock;

int64_t bytes_of(const std::vector<torch::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const auto& t : tensors) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

// One world's part: rank 0 steps Adam once (gradients of ones), then every rank times heals.
void heal_role(int heals) {
  torch::manual_seed(lockstep::rank());
  auto model = lockstep::train::make_model(
      "resnet50", lockstep::train::ModelOptions().in_channels(3).num_classes(1000).image_size(224));
  auto optimizer = torch::optim::Adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  if (lockstep::rank() == 0) {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::ones_like(p);
    optimizer.step();
  }
  std::vector<double> seconds, module_seconds, raw_seconds;
  for (int heal = 0; heal < heals; ++heal) {
    lockstep::barrier();
    const auto start = Clock::now();
    lockstep::synchronize(*model.ptr(), 0);
    const auto module_done = Clock::now();
    lockstep::synchronize(optimizer, 0);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    module_seconds.push_back(std::chrono::duration<double>(module_done - start).count());
  }
  // The floor beside it: the same bytes as one tensor, one broadcast.
  torch::Tensor one = torch::empty({306900000 / 4}, torch::kFloat);
  for (int i = 0; i < heals; ++i) {
    lockstep::barrier();
    const auto start = Clock::now();
    lockstep::broadcast(one, 0);
    raw_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::vector<torch::Tensor> sent = model->parameters();
  for (const auto& b : model->buffers()) sent.push_back(b);
  for (const auto& entry : optimizer.state()) {  // keyed differently across libtorch releases
    const auto& state = static_cast<const torch::optim::AdamParamState&>(*entry.second);
    sent.push_back(state.exp_avg());
    sent.push_back(state.exp_avg_sq());
  }
  if (lockstep::rank() == 0)
    std::printf("%lld %.6f %.6f %.6f\n", static_cast<long long>(bytes_of(sent)), median(seconds),
                median(module_seconds), median(raw_seconds));
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  if (argc > 1 && std::string(argv[1]) == "heal") {
    lockstep::init();
    heal_role(5);
    lockstep::shutdown();
    return 0;
  }
  const std::string self = std::filesystem::canonical("/proc/self/exe");
  std::printf("ResNet-50 + Adam healed from rank 0 to rank 1 (median of 5 heals):\n");
  for (const char* shm : {"1", "0"}) {
    setenv("LOCKSTEP_SHM", shm, 1);
    long long bytes = 0;
    double seconds = 0, module_seconds = 0, raw_seconds = 0;
    std::sscanf(lockstep::bench::run_world(2, {self, "heal"}).c_str(), "%lld %lf %lf %lf", &bytes, &seconds,
                &module_seconds, &raw_seconds);
    std::printf("  over %-22s %7.1f MB in %.3f s: %.2f GB/s\n",
                std::string(shm) == "1" ? "shared memory" : "Gloo on loopback", bytes / 1e6, seconds,
                seconds > 0 ? bytes / seconds / 1e9 : 0);
    std::printf("    of which the module %.3f s; the same bytes as one tensor, one broadcast: %.3f s (%.2f GB/s)\n",
                module_seconds, raw_seconds, raw_seconds > 0 ? bytes / raw_seconds / 1e9 : 0);
  }
  return 0;
}
