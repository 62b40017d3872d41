// A training loop of one's own that survives failed workers without a restart: under
// `lockstep run --recovery live` the others regroup and train on in the same processes,
// and a replacement (--max-restarts) is healed from them and joins.
//
//   lockstep run -n 3 --recovery live --max-restarts 1 -- live_loop [--steps 200]
//
// It fits a small network to a fixed function, in double precision, with a global batch of
// 24 samples a step whatever the number of workers: step s trains on the same samples on 3
// workers or on 2, so a fault changes the result only by the order of a few sums.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "lockstep/lockstep.h"

namespace {

constexpr int64_t kGlobalBatch = 24, kSamples = 960, kFeatures = 8;

// Every member's parameters, compared with rank 0's.
bool alike_on_every_member(torch::nn::Module& model) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : model.parameters()) flat.push_back(p.detach().reshape(-1));
  const torch::Tensor mine = torch::cat(flat);
  torch::Tensor root = mine.clone();
  lockstep::broadcast(root, 0);
  torch::Tensor alike = torch::tensor({torch::equal(mine, root) ? 1 : 0}, torch::kInt);
  lockstep::all_reduce(alike, lockstep::ReduceOp::Min);
  return alike.item<int>() == 1;
}

}  // namespace

int train(int argc, char** argv) {
  int64_t steps = 200, step_ms = 0;
  std::string save;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--step-ms") == 0) step_ms = std::atoll(argv[i + 1]);  // slower steps, for the tests
    if (std::strcmp(argv[i], "--save") == 0) save = argv[i + 1];                    // rank 0's parameters, at the end
  }
  torch::manual_seed(0);  // the same samples and initial parameters in every worker
  const auto x = torch::rand({kSamples, kFeatures}, torch::kDouble) * 2 - 1;
  const auto y = torch::sin(2 * x).mean(1, /*keepdim=*/true);
  torch::nn::Sequential model(torch::nn::Linear(kFeatures, 32), torch::nn::Tanh(), torch::nn::Linear(32, 1));
  model->to(torch::kDouble);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  // Each rank's loss is its samples' squared errors over the global batch, and DDP sums the
  // gradients: the global batch's mean however unevenly it is shared.
  lockstep::LiveTraining live(model, optimizer, steps, lockstep::DDPOptions().reduce_op(lockstep::ReduceOp::Sum));
  while (live.more()) {
    double loss_of_step = 0;
    const bool counted = live.train_step([&](const lockstep::LiveStep& s) {
      const int64_t first = s.step * kGlobalBatch % kSamples;
      const int64_t begin = first + kGlobalBatch * s.rank / s.world_size;
      const int64_t end = first + kGlobalBatch * (s.rank + 1) / s.world_size;
      optimizer.zero_grad();
      auto loss = (model->forward(x.slice(0, begin, end)) - y.slice(0, begin, end)).pow(2).sum() / kGlobalBatch;
      loss.backward();
      torch::Tensor total = loss.detach().clone();
      lockstep::all_reduce(total);
      loss_of_step = total.item<double>();
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    });
    if (counted && lockstep::rank() == 0) {
      std::printf("step %lld/%lld  loss %.6f\n", static_cast<long long>(live.step()), static_cast<long long>(steps),
                  loss_of_step);
      std::fflush(stdout);
    }
  }
  if (lockstep::is_initialized()) {  // not in a replacement that found the job done
    if (!alike_on_every_member(*model)) {
      std::fprintf(stderr, "the members' parameters differ\n");
      return 1;
    }
    if (lockstep::rank() == 0) {
      std::printf("the parameters are identical on all %d members\n", lockstep::world_size());
      if (!save.empty()) torch::save(model, save);
    }
  }
  lockstep::shutdown();
  return 0;
}

int main(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const std::exception& error) {  // e.g. fewer workers left than -n MIN:MAX allows
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
