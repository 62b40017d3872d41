// What ShardedOptimizer (ZeRO stage 1) saves and costs, against DistributedDataParallel with
// the unsharded optimizer, Adam throughout, and what gradients as bucket views
// (DDPOptions::gradient_as_bucket_view) save and cost against gradients copied out:
//
//   bench/zero             (bench/zero views-only: the bucket views alone)
//
// - memory: ResNet-50 (ImageNet's, 1000 classes; 64×64 inputs, which change no parameter)
//   after one step on 2 and 3 ranks: the optimizer state bytes of the rank holding the most,
//   and the largest peak resident memory of a rank (VmHWM), both ways;
// - step time: the CNN of bench/ddp_cnn (batch 64 per rank) and ResNet-18 (batch 16 of
//   64×64 images) on 2 ranks, one intra-op thread each: windows of steps alternate between
//   two identical models, one with each optimizer, in ABBA order; median of the pairs' ratios;
// - checkpoint write: ResNet-50 + Adam on 2 ranks, each rank writing its shard against rank 0
//   writing everything (both fsynced), alternately; medians.
// - ZeRO-2 (gradients sharded too, DistributedDataParallel::shard_gradients; `bench/zero
//   zero2-only` alone): ResNet-50's gradient and state bytes and peak resident memory in its
//   third step on 2 and 3 ranks against DDP + Adam and ZeRO-1, and its step time as above;
// - bucket views: peak resident memory of ResNet-50 + Adam in its third step, and the step time of the
//   perceptron's MLP (one sample a step: latency-bound), the CNN and ResNet-18, as above,
//   windows alternating between views and copies.
// Every rank is a real process on this machine (bench/run_world.h).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/models.h"
#include "median.h"
#include "run_world.h"
#include "train/checkpoint/distributed_checkpoint.h"

namespace {

namespace fs = std::filesystem;
using lockstep::bench::median;
using lockstep::bench::median_paired_ratio;
using lockstep::bench::run_world;
using Clock = std::chrono::steady_clock;

torch::nn::Sequential make_model(const std::string& name) {
  torch::manual_seed(0);
  if (name == "mlp") {  // the perceptron example's, with two classes
    return torch::nn::Sequential(torch::nn::Linear(10, 100), torch::nn::ReLU(), torch::nn::Linear(100, 2));
  }
  if (name == "cnn") {
    return torch::nn::Sequential(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
        torch::nn::Flatten(), torch::nn::Linear(3136, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  }
  return lockstep::train::make_model(name, lockstep::train::ModelOptions().image_size(64).small_input(false));
}

// A batch for `name`: the CNN's Fashion-MNIST-sized images, or 64×64 RGB for a ResNet.
std::pair<torch::Tensor, torch::Tensor> batch_for(const std::string& name, int64_t size) {
  if (name == "mlp") return {torch::randn({size, 10}), torch::randint(0, 2, {size})};
  if (name == "cnn") return {torch::randn({size, 1, 28, 28}), torch::randint(0, 10, {size})};
  return {torch::randn({size, 3, 64, 64}), torch::randint(0, 1000, {size})};
}

std::unique_ptr<torch::optim::Optimizer> make_adam(torch::nn::Module& model, int stage) {
  const bool sharded = stage > 0;
  const auto options = torch::optim::AdamOptions(1e-4);
  if (sharded) return std::make_unique<lockstep::ShardedOptimizer<torch::optim::Adam>>(model.parameters(), options);
  return std::make_unique<torch::optim::Adam>(model.parameters(), options);
}

// A model with its DDP and Adam, stepped on one fixed batch. ZeRO `stage` 0: DDP and Adam;
// 1: Adam's state sharded; 2: the gradients too.
struct Training {
  Training(const std::string& name, int stage, int64_t batch, bool views = false)
      : model(make_model(name)),
        ddp(model, lockstep::DDPOptions().gradient_as_bucket_view(views)),
        optimizer(make_adam(*model, stage)),
        views(views) {
    std::tie(x, y) = batch_for(name, batch);
    if (stage == 2) ddp.shard_gradients(dynamic_cast<lockstep::OptimizerSharding&>(*optimizer));
  }
  // The gradients' storage and DDP's buckets, each counted once (views share theirs).
  int64_t gradient_bytes() const {
    std::set<const void*> seen;
    int64_t bytes = views ? 0 : ddp.bucket_bytes();
    for (const auto& p : model->parameters()) {
      if (p.grad().defined() && seen.insert(p.grad().storage().data()).second) {
        bytes += static_cast<int64_t>(p.grad().storage().nbytes());
      }
    }
    return bytes;
  }
  void step() {
    optimizer->zero_grad();
    torch::cross_entropy_loss(model->forward(x), y).backward();
    optimizer->step();
  }
  int64_t state_bytes() const {
    int64_t bytes = 0;
    for (const auto& [key, state] : optimizer->state()) {
      const auto& adam = static_cast<const torch::optim::AdamParamState&>(*state);
      for (const auto& t : {adam.exp_avg(), adam.exp_avg_sq(), adam.max_exp_avg_sq()}) {
        if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
      }
    }
    return bytes;
  }

  torch::nn::Sequential model;
  lockstep::DistributedDataParallel ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  bool views;
  torch::Tensor x, y;
};

// This process's peak resident memory in bytes (VmHWM).
int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// The largest value of any rank.
int64_t most_of_any_rank(int64_t value) {
  torch::Tensor t = torch::tensor({value});
  lockstep::all_reduce(t, lockstep::ReduceOp::Max);
  return t.item<int64_t>();
}

// Rank 0 prints "STATE_BYTES PEAK_RSS_BYTES", each the largest of any rank: of the first
// step, or with `steady`, of the third alone (the first rebuilds DDP's buckets and makes the
// optimizer's state; Linux resets the peak when told to).
void memory(int stage, bool views = false, bool steady = false) {
  Training training("resnet50", stage, 4, views);
  training.step();
  if (steady) {
    training.step();
    std::ofstream("/proc/self/clear_refs") << "5";
    training.step();
  }
  const int64_t state = most_of_any_rank(training.state_bytes());
  const int64_t peak = most_of_any_rank(peak_resident_bytes());
  const int64_t gradients = most_of_any_rank(training.gradient_bytes());
  if (lockstep::rank() == 0) {
    std::printf("%lld %lld %lld\n", static_cast<long long>(state), static_cast<long long>(peak),
                static_cast<long long>(gradients));
  }
}

double timed_seconds(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rank 0 prints the median over ABBA pairs of `a`'s window's time over `b`'s.
void print_paired_ratio(Training& a, Training& b, int steps_per_window, int pairs) {
  auto window = [&](Training& t) {
    return timed_seconds([&] {
      for (int i = 0; i < steps_per_window; ++i) t.step();
    });
  };
  window(b), window(a);  // warm-up
  const double ratio = median_paired_ratio(
      pairs, [&] { return window(a); }, [&] { return window(b); });
  if (lockstep::rank() == 0) std::printf("%.5f\n", ratio);
}

// ZeRO `stage` against the unsharded optimizer.
void step_time(const std::string& name, int64_t batch, int steps_per_window, int pairs, int stage = 1) {
  Training unsharded(name, 0, batch), sharded(name, stage, batch);
  print_paired_ratio(sharded, unsharded, steps_per_window, pairs);
}

// Gradients as bucket views against gradients copied out.
void views_step_time(const std::string& name, int64_t batch, int steps_per_window, int pairs) {
  Training copies(name, 0, batch, false), views(name, 0, batch, true);
  print_paired_ratio(views, copies, steps_per_window, pairs);
}

// Rank 0 prints the median seconds of a sharded checkpoint's write and of an unsharded one's.
void checkpoint_write(int repeats) {
  namespace train = lockstep::train;
  Training unsharded("resnet50", 0, 4), sharded("resnet50", 1, 4);
  unsharded.step();
  sharded.step();
  const std::string folder = fs::temp_directory_path() / ("lockstep-bench-zero-" + std::to_string(getppid()));
  auto write = [&](Training& t, const std::string& sub, int64_t step) {
    const train::CheckpointFolder checkpoints(folder + "/" + sub, 1);
    const train::TrainedState state{*t.model, *t.optimizer, t.ddp, torch::kCPU, lockstep::ProcessGroup()};
    lockstep::barrier();
    return timed_seconds([&] {
      train::save_collectively(checkpoints, state, {0, step, step, lockstep::world_size()}, "resnet50");
      lockstep::barrier();  // until every rank's part is written
    });
  };
  std::vector<double> with_shards, whole;
  for (int i = 0; i < repeats; ++i) {
    if (i % 2 == 0) {
      with_shards.push_back(write(sharded, "sharded", i)), whole.push_back(write(unsharded, "whole", i));
    } else {
      whole.push_back(write(unsharded, "whole", i)), with_shards.push_back(write(sharded, "sharded", i));
    }
  }
  lockstep::barrier();
  if (lockstep::rank() == 0) {
    const auto file_size = [&](const std::string& sub) {
      return static_cast<long long>(fs::file_size(train::CheckpointFolder(folder + "/" + sub, 1).path(repeats - 1)));
    };
    std::printf("%.4f %.4f %lld %lld\n", median(with_shards), median(whole), file_size("sharded"), file_size("whole"));
    fs::remove_all(folder);
  }
}

double mib(double bytes) { return bytes / (1 << 20); }

// Runs `role` on 2 ranks `repeats` times and prints "LABEL: MEDIAN× (runs: ...)".
void print_ratio_runs(const std::string& self, const std::string& role, const std::string& label, int repeats) {
  std::vector<double> ratios;
  for (int repeat = 0; repeat < repeats; ++repeat) ratios.push_back(std::atof(run_world(2, {self, role}).c_str()));
  std::printf("%s: %.3f× (runs:", label.c_str(), median(ratios));
  for (double r : ratios) std::printf(" %.3f", r);
  std::printf(")\n");
}

// ZeRO-2 against DDP + Adam and ZeRO-1: gradient and state bytes, peak memory, step time.
void report_zero_two(const std::string& self, int repeats) {
  std::printf("\nZeRO-2, ResNet-50 + Adam, the rank holding the most after its third step (medians of %d runs):\n\n",
              repeats);
  std::printf(
      "| ranks | stage | gradient bytes (grads and buckets) | state bytes | both, against DDP + Adam | peak resident "
      "memory in the step |\n");
  std::printf("|---:|---|---:|---:|---:|---:|\n");
  for (int ranks : {2, 3}) {
    std::map<int, std::vector<double>> grads, states, peaks, ratios;
    for (int repeat = 0; repeat < repeats; ++repeat) {
      double unsharded_total = 0;
      for (int stage : {0, 1, 2}) {
        long long state = 0, peak = 0, gradients = 0;
        std::sscanf(run_world(ranks, {self, "memory-stage-" + std::to_string(stage)}).c_str(), "%lld %lld %lld", &state,
                    &peak, &gradients);
        grads[stage].push_back(gradients), states[stage].push_back(state), peaks[stage].push_back(peak);
        if (stage == 0) unsharded_total = static_cast<double>(state + gradients);
        ratios[stage].push_back(unsharded_total > 0 ? (state + gradients) / unsharded_total : 0);
      }
    }
    for (int stage : {0, 1, 2}) {
      std::printf("| %d | %s | %.1f MiB | %.1f MiB | %.3f× | %.0f MiB |\n", ranks,
                  stage == 0   ? "DDP + Adam"
                  : stage == 1 ? "ZeRO-1"
                               : "ZeRO-2",
                  mib(median(grads[stage])), mib(median(states[stage])), median(ratios[stage]),
                  mib(median(peaks[stage])));
    }
  }
  std::printf("\nstep time on 2 ranks, ZeRO-2 / DDP + Adam (median of paired windows, per run):\n");
  for (const std::string model : {"cnn", "resnet18"}) print_ratio_runs(self, "zero2-" + model, model, repeats);
}

// Gradients as bucket views against gradients copied out, on 2 ranks.
void report_bucket_views(const std::string& self, int repeats) {
  std::printf("\ngradients as bucket views, 2 ranks (medians of %d runs):\n", repeats);
  std::vector<double> copied_peak, views_peak;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    long long state = 0, copied = 0, viewed = 0;
    std::sscanf(run_world(2, {self, "memory-ddp-steady"}).c_str(), "%lld %lld", &state, &copied);
    std::sscanf(run_world(2, {self, "memory-views-steady"}).c_str(), "%lld %lld", &state, &viewed);
    copied_peak.push_back(copied), views_peak.push_back(viewed);
  }
  std::printf(
      "ResNet-50 + Adam, peak resident memory per rank in a step after the first two: copied out %.0f MiB, "
      "views %.0f MiB\n",
      mib(median(copied_peak)), mib(median(views_peak)));
  for (const std::string model : {"mlp", "cnn", "resnet18"}) {
    print_ratio_runs(self, "views-" + model, model + " step time, views / copies", repeats);
  }
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "views-only") {
    report_bucket_views(fs::canonical("/proc/self/exe"), 3);
    return 0;
  }
  if (role == "zero2-only") {
    report_zero_two(fs::canonical("/proc/self/exe"), 3);
    return 0;
  }
  if (!role.empty()) {
    lockstep::init();
    if (role == "memory-ddp" || role == "memory-zero") memory(role == "memory-zero" ? 1 : 0);
    if (role == "memory-ddp-steady" || role == "memory-views-steady") memory(0, role == "memory-views-steady", true);
    if (role.rfind("memory-stage-", 0) == 0) memory(std::stoi(role.substr(13)), false, true);
    if (role == "zero2-cnn") step_time("cnn", 64, 5, 20, 2);
    if (role == "zero2-resnet18") step_time("resnet18", 16, 2, 10, 2);
    if (role == "views-mlp") views_step_time("mlp", 1, 500, 20);
    if (role == "views-cnn") views_step_time("cnn", 64, 5, 20);
    if (role == "views-resnet18") views_step_time("resnet18", 16, 2, 10);
    if (role == "step-cnn") step_time("cnn", 64, 5, 20);
    if (role == "step-resnet18") step_time("resnet18", 16, 2, 10);
    if (role == "checkpoint") checkpoint_write(6);
    lockstep::shutdown();
    return 0;
  }

  const std::string self = fs::canonical("/proc/self/exe");
  constexpr int kRepeats = 3;
  std::printf("ResNet-50 + Adam after one step (the rank holding the most; median of %d runs):\n\n", kRepeats);
  std::printf(
      "| ranks | optimizer | Adam state bytes per rank | against DDP + Adam | peak resident memory per rank |\n");
  std::printf("|---:|---|---:|---:|---:|\n");
  for (int ranks : {2, 3}) {
    std::vector<double> state_ratio, ddp_state, zero_state, ddp_peak, zero_peak;
    for (int repeat = 0; repeat < kRepeats; ++repeat) {
      long long ds = 0, dp = 0, zs = 0, zp = 0;
      std::sscanf(run_world(ranks, {self, "memory-ddp"}).c_str(), "%lld %lld", &ds, &dp);
      std::sscanf(run_world(ranks, {self, "memory-zero"}).c_str(), "%lld %lld", &zs, &zp);
      ddp_state.push_back(ds), ddp_peak.push_back(dp), zero_state.push_back(zs), zero_peak.push_back(zp);
      state_ratio.push_back(ds > 0 ? static_cast<double>(zs) / ds : 0);
    }
    std::printf("| %d | DDP + Adam | %.1f MiB | | %.0f MiB |\n", ranks, mib(median(ddp_state)), mib(median(ddp_peak)));
    std::printf("| %d | ShardedOptimizer<Adam> | %.1f MiB | %.3f× | %.0f MiB |\n", ranks, mib(median(zero_state)),
                median(state_ratio), mib(median(zero_peak)));
  }

  std::printf("\nstep time on 2 ranks, ShardedOptimizer<Adam> / DDP + Adam (median of paired windows, per run):\n");
  for (const std::string model : {"cnn", "resnet18"}) print_ratio_runs(self, "step-" + model, model, kRepeats);

  report_zero_two(self, kRepeats);
  report_bucket_views(self, kRepeats);

  std::printf("\ncheckpoint write, ResNet-50 + Adam on 2 ranks, fsynced (medians of 6 alternating writes, per run):\n");
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    double sharded = 0, whole = 0;
    long long sharded_file = 0, whole_file = 0;
    std::sscanf(run_world(2, {self, "checkpoint"}).c_str(), "%lf %lf %lld %lld", &sharded, &whole, &sharded_file,
                &whole_file);
    std::printf(
        "each rank its shard: %.3f s (rank 0's file %.0f MiB); rank 0 everything: %.3f s (%.0f MiB); ratio %.3f\n",
        sharded, mib(sharded_file), whole, mib(whole_file), whole > 0 ? sharded / whole : 0);
  }
  return 0;
}
