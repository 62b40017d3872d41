// FluxMPI's quick start in lockstep: every rank fits y = x^2 on 16 samples of its own, and
// DistributedOptimizer averages the gradients across ranks before each Adam step.
//
//   lockstep run -n 2 -- quickstart
#include <cstdio>

#include <torch/torch.h>

#include "lockstep/lockstep.h"

int main() {
  lockstep::init();
  torch::manual_seed(lockstep::rank());  // each rank its own data (and init, until synchronized)
  const auto x = torch::rand({16, 1});
  const auto y = x.pow(2);

  torch::nn::Sequential model(torch::nn::Linear(1, 2), torch::nn::Tanh(), torch::nn::Linear(2, 1));
  lockstep::synchronize(model);  // everyone starts from rank 0's parameters
  lockstep::DistributedOptimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(0.001));
  for (int epoch = 1; epoch <= 100; ++epoch) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    auto mean_loss = loss.detach().clone();
    lockstep::all_reduce(mean_loss, lockstep::ReduceOp::Avg);
    if (lockstep::rank() == 0 && epoch % 10 == 1) {
      std::printf("epoch %3d  loss %.6f\n", epoch, mean_loss.item<double>());
    }
  }
  lockstep::shutdown();
  return 0;
}
