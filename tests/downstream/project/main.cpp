#include <iostream>

#include <lockstep/lockstep.h>
#include <torch/torch.h>

int main() {
  lockstep::init();
  torch::Tensor t = torch::full({4}, lockstep::rank() + 1.0);
  lockstep::all_reduce(t);
  const int n = lockstep::world_size();
  const bool right = t.equal(torch::full({4}, n * (n + 1) / 2.0));
  std::cout << "rank " << lockstep::rank() << " of " << n << ": all_reduce " << (right ? "right" : "WRONG")
            << std::endl;
  lockstep::shutdown();
  return right ? 0 : 1;
}
