// Data-parallel training of a small MLP, after the distributed example in flashlight's
// documentation. Each rank trains on its share of 10000 samples, one sample per step;
// DistributedDataParallel averages the gradients across ranks during backward.
//
//   lockstep run -n 2 -- perceptron [--epochs 10]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <torch/torch.h>

#include "lockstep/lockstep.h"

int main(int argc, char** argv) {
  int epochs = 10;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--epochs") == 0) epochs = std::atoi(argv[i + 1]);
  }
  lockstep::init();
  const int rank = lockstep::rank();
  const int world_size = lockstep::world_size();

  // Every rank makes the same data set and keeps its own contiguous share of it.
  const int64_t samples = 10000, features = 10;
  torch::manual_seed(42);
  const auto x = torch::rand({samples, features}) + 1;  // in [1, 2]^10
  const auto y = x.pow(3).sum(1, /*keepdim=*/true) + torch::sin(2 * M_PI * torch::rand({samples, 1}));
  const int64_t share = samples / world_size;
  const auto my_x = x.slice(0, rank * share, (rank + 1) * share);
  const auto my_y = y.slice(0, rank * share, (rank + 1) * share);

  torch::manual_seed(rank);  // deliberately different inits: DDP starts everyone from rank 0's
  torch::nn::Sequential model(torch::nn::Linear(features, 100), torch::nn::ReLU(), torch::nn::Linear(100, 1));
  // Gradients as views into DDP's buckets: the reduced bucket is the gradient, no copy out.
  lockstep::DistributedDataParallel ddp(model, lockstep::DDPOptions().gradient_as_bucket_view(true));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-4).momentum(0.9));

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    auto loss_sum = torch::zeros({1}, torch::kDouble);
    for (int64_t i = 0; i < share; ++i) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(my_x[i].unsqueeze(0)), my_y[i].unsqueeze(0));
      loss.backward();  // returns with the gradients averaged across ranks
      optimizer.step();
      loss_sum += loss.detach().to(torch::kDouble);
    }
    lockstep::all_reduce(loss_sum);
    if (rank == 0) {
      std::printf("epoch %d/%d  mse %.4f\n", epoch, epochs,
                  loss_sum.item<double>() / static_cast<double>(share * world_size));
      std::fflush(stdout);
    }
  }
  lockstep::shutdown();
  return 0;
}
