// Checkpoints move between devices: saved from a GPU run and resumed on the CPU, and the
// other way round, the optimizer's state following its parameters. Labelled gpu.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/device.h"
#include "support/tool_process.h"

namespace lockstep::train {
namespace {

struct Trained {
  torch::nn::Linear model{8, 4};
  std::shared_ptr<torch::optim::Adam> optimizer;

  explicit Trained(torch::Device device) {
    torch::manual_seed(5);
    model = torch::nn::Linear(8, 4);
    model->to(device);
    optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.1));
  }
  void step(torch::Device device) {
    optimizer->zero_grad();
    model->forward(torch::ones({2, 8}, device)).pow(2).sum().backward();
    optimizer->step();
  }
};

// Saves after two steps on `from`, loads on `to`, steps once more on each: the same result.
void expect_resumed_across(torch::Device from, torch::Device to) {
  testing::TemporaryDirectory dir;
  Trained original(from);
  original.step(from);
  original.step(from);
  const CheckpointFolder folder(dir.path(), 1);
  const std::string saved = folder.save(*original.model, *original.optimizer, CheckpointState());

  Trained resumed(to);
  load_checkpoint(saved, *resumed.model, *resumed.optimizer);
  resumed.step(to);  // Adam's state must be on `to` for this to run
  original.step(from);
  EXPECT_TRUE(resumed.model->weight.device() == to);
  EXPECT_TRUE(torch::allclose(resumed.model->weight.cpu(), original.model->weight.cpu(), 1e-6, 1e-6))
      << from << " -> " << to;
}

TEST(CheckpointDevices, AGpuRunResumesOnTheCpuAndACpuRunOnTheGpu) {
  if (visible_gpus() == 0)
    GTEST_SKIP() << "no CUDA device is visible, or this lockstep was built against a CPU libtorch";
  expect_resumed_across(torch::Device(torch::kCUDA, 0), torch::kCPU);
  expect_resumed_across(torch::kCPU, torch::Device(torch::kCUDA, 0));
}

}  // namespace
}  // namespace lockstep::train
