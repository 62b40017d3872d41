// Training throughput on GPUs: ResNet-50, batch 128 per worker, bf16 autocast, SGD with
// momentum, on synthetic 224×224 images already on the device (input pipelines are
// bench/data_loader's):
//
//   bench/gpu_train [--device cuda] [--model resnet50] [--batch 128] [--image-size 224]
//                   [--steps 20] [--repeats 5] [--precision bf16]
//   lockstep run -n GPUS -- bench/gpu_train ...        (world = GPUs)
//
// runs, side by side in alternating windows, a plain libtorch loop and the same loop under
// lockstep's DistributedDataParallel, and prints the median images/s of each and their ratio
// (issue 8's target: at least 0.99). At world 1 lockstep's DDP adds no per-step work, so a
// third loop runs its reducer anyway (a comm hook does: allreduce_hook, bucketing and
// all_reduce as at any world size), which is what PyTorch's DDP does at world 1:
// bench/gpu_train.py is the same job under PyTorch's Python DDP (torchrun for world > 1),
// for that ratio. Both print the model's parameter count and tensors, which must agree.
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

enum class Wrapping { plain, ddp, ddp_with_reducer };

torch::nn::Sequential make_model(const Settings& s) {
  return lockstep::train::make_model(
      s.model, lockstep::train::ModelOptions().in_channels(3).num_classes(1000).image_size(s.image_size));
}

// One model and optimizer, stepped on a fixed batch, plain or under DDP.
class Loop {
 public:
  Loop(const Settings& s, const torch::Device& device, Wrapping wrapping) : settings_(s), device_(device) {
    torch::manual_seed(0);
    model_ = make_model(s);
    model_->to(device);
    optimizer_ =
        std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    auto options = lockstep::DDPOptions();
    if (wrapping == Wrapping::ddp_with_reducer) options.comm_hook(lockstep::allreduce_hook());
    if (wrapping != Wrapping::plain) ddp_ = std::make_unique<lockstep::DistributedDataParallel>(model_, options);
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

// "cuda" means this worker's own GPU (its local rank's) when launched with one per GPU.
torch::Device worker_device(const std::string& asked) {
  if (asked != "cuda" || torch::cuda::device_count() == 0) return torch::Device(asked);
  return torch::Device(torch::kCUDA,
                       static_cast<c10::DeviceIndex>(lockstep::local_rank() % torch::cuda::device_count()));
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Training throughput on one GPU: plain libtorch against lockstep's DDP at world 1"};
  app.add_option("--device", s.device, "cuda, cuda:N or cpu")->capture_default_str();
  app.add_option("--model", s.model, "A lockstep train model name")->capture_default_str();
  app.add_option("--precision", s.precision, "bf16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  app.add_option("--batch", s.batch, "Images per step")->capture_default_str();
  app.add_option("--image-size", s.image_size, "Height and width")->capture_default_str();
  app.add_option("--steps", s.steps, "Steps per timed window")->capture_default_str();
  app.add_option("--repeats", s.repeats, "Windows of each, alternating")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  lockstep::init();  // a world of one, or the launcher's
  const bool world_of_one = lockstep::world_size() == 1;
  const torch::Device device = worker_device(s.device);
  std::vector<std::pair<std::string, Loop>> loops;
  loops.emplace_back("plain libtorch loop", Loop(s, device, Wrapping::plain));
  loops.emplace_back("lockstep DDP", Loop(s, device, Wrapping::ddp));
  if (world_of_one) loops.emplace_back("lockstep DDP, reducer running", Loop(s, device, Wrapping::ddp_with_reducer));
  for (auto& [name, loop] : loops) loop.window(3);  // warm-up: cuDNN's search, the caching allocator, DDP's buckets
  std::vector<std::vector<double>> rates(loops.size()), ratios(loops.size());
  for (int r = 0; r < s.repeats; ++r) {
    for (size_t i = 0; i < loops.size(); ++i) {
      rates[i].push_back(loops[i].second.window(s.steps));
      ratios[i].push_back(rates[i].back() / rates[0].back());
    }
  }
  if (lockstep::rank() == 0) {
    int64_t parameters = 0, tensors = 0;
    for (const auto& p : make_model(s)->parameters()) parameters += p.numel(), ++tensors;
    std::printf(
        "%s (%lld parameters in %lld tensors), batch %lld per worker, %lldx%lld, %s on %s, world %d, "
        "%d windows of %d steps (medians)\n",
        s.model.c_str(), static_cast<long long>(parameters), static_cast<long long>(tensors),
        static_cast<long long>(s.batch), static_cast<long long>(s.image_size), static_cast<long long>(s.image_size),
        s.precision.c_str(), device.str().c_str(), lockstep::world_size(), s.repeats, s.steps);
    for (size_t i = 0; i < loops.size(); ++i) {
      std::printf("%-31s %10.1f images/s per worker", loops[i].first.c_str(), median(rates[i]));
      if (i > 0) std::printf(", %.3f of plain (median of the windows' ratios)", median(ratios[i]));
      std::printf("\n");
    }
  }
  lockstep::shutdown();
  return 0;
}
