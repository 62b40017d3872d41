// Training throughput on one GPU: ResNet-50, batch 128, bf16 autocast, SGD with momentum, on
// synthetic 224×224 images already on the device (input pipelines are bench/data_loader's):
//
//   bench/gpu_train [--device cuda] [--model resnet50] [--batch 128] [--image-size 224]
//                   [--steps 20] [--repeats 5] [--precision bf16]
//
// runs, side by side in alternating windows, a plain libtorch loop and the same loop under
// lockstep's DistributedDataParallel at world 1, and prints the median images/s of each and
// their ratio (issue 8's target: at least 0.99; world 1 adds no per-step work).
// bench/gpu_train.py is the same job under PyTorch's Python DDP, for the second ratio.
// `--device cpu --model cnn --image-size 28 --batch 16` runs it anywhere, as a smoke check.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "lockstep/train/models.h"
#include "median.h"
#include "train/autocast_guard.h"

namespace {

using lockstep::bench::median;

using Clock = std::chrono::steady_clock;

struct Settings {
  std::string device = "cuda";
  std::string model = "resnet50";
  std::string precision = "bf16";
  int64_t batch = 128;
  int64_t image_size = 224;
  int steps = 20;
  int repeats = 5;
};

void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// One model and optimizer, stepped on a fixed batch; with DDP when `ddp` is set.
class Loop {
 public:
  Loop(const Settings& s, const torch::Device& device, bool ddp) : settings_(s), device_(device) {
    torch::manual_seed(0);
    model_ = lockstep::train::make_model(
        s.model, lockstep::train::ModelOptions().in_channels(3).num_classes(1000).image_size(s.image_size));
    model_->to(device);
    optimizer_ = std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    if (ddp) ddp_ = std::make_unique<lockstep::DistributedDataParallel>(model_);
    images_ = torch::randn({s.batch, 3, s.image_size, s.image_size}, torch::TensorOptions().device(device));
    labels_ = torch::randint(1000, {s.batch}, torch::TensorOptions().dtype(torch::kLong).device(device));
  }

  void step() {
    optimizer_->zero_grad();
    torch::Tensor loss;
    {
      lockstep::train::AutocastGuard autocast(device_.type(), settings_.precision == "bf16");
      loss = torch::nn::functional::cross_entropy(model_->forward(images_), labels_);
    }
    loss.backward();
    optimizer_->step();
  }

  // Images per second over `steps` steps, device work included.
  double window(int steps) {
    wait_for(device_);
    const auto began = Clock::now();
    for (int i = 0; i < steps; ++i) step();
    wait_for(device_);
    return static_cast<double>(steps * settings_.batch) / std::chrono::duration<double>(Clock::now() - began).count();
  }

 private:
  const Settings& settings_;
  torch::Device device_;
  torch::nn::Sequential model_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<lockstep::DistributedDataParallel> ddp_;
  torch::Tensor images_, labels_;
};

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Training throughput on one GPU: plain libtorch against lockstep's DDP at world 1"};
  app.add_option("--device", s.device, "cuda, cuda:N or cpu")->capture_default_str();
  app.add_option("--model", s.model, "A lockstep train model name")->capture_default_str();
  app.add_option("--precision", s.precision, "bf16 or fp32")->check(CLI::IsMember({"bf16", "fp32"}))->capture_default_str();
  app.add_option("--batch", s.batch, "Images per step")->capture_default_str();
  app.add_option("--image-size", s.image_size, "Height and width")->capture_default_str();
  app.add_option("--steps", s.steps, "Steps per timed window")->capture_default_str();
  app.add_option("--repeats", s.repeats, "Windows of each, alternating")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  lockstep::init();  // a world of one
  const torch::Device device(s.device);
  Loop plain(s, device, false), ddp(s, device, true);
  plain.window(3);  // warm-up: cuDNN's algorithm search, the caching allocator, DDP's first buckets
  ddp.window(3);
  std::vector<double> plain_rates, ddp_rates, ratios;
  for (int r = 0; r < s.repeats; ++r) {
    plain_rates.push_back(plain.window(s.steps));
    ddp_rates.push_back(ddp.window(s.steps));
    ratios.push_back(ddp_rates.back() / plain_rates.back());
  }
  std::printf("%s, batch %lld, %lldx%lld, %s on %s, %d windows of %d steps (medians)\n", s.model.c_str(),
              static_cast<long long>(s.batch), static_cast<long long>(s.image_size),
              static_cast<long long>(s.image_size), s.precision.c_str(), device.str().c_str(), s.repeats, s.steps);
  std::printf("plain libtorch loop           %10.1f images/s\n", median(plain_rates));
  std::printf("lockstep DDP, world 1         %10.1f images/s\n", median(ddp_rates));
  std::printf("lockstep / plain              %10.3f (median of the windows' ratios)\n", median(ratios));
  lockstep::shutdown();
  return 0;
}
