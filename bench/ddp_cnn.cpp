// Training throughput of a small CNN on Fashion-MNIST-sized input (1x28x28, batch 64 per
// worker, one intra-op thread per worker, SGD with momentum):
//
//   bench/ddp_cnn
//
// runs, side by side and several times over, a plain libtorch loop (alone, and as two
// independent processes), lockstep's DistributedDataParallel on 1 and 2 workers, and
// PyTorch's own DistributedDataParallel (Debian's python3-torch, gloo) on 1 and 2 workers,
// and prints median samples per second, lockstep's scaling efficiency, its speed against
// PyTorch, and its overhead on 1 worker.
// It also times the perceptron example per step on 1 and 2 workers (and as 2 independent
// processes, the machine's ceiling), lockstep's DDP at 1 worker against the plain loop in
// one process (paired windows), and lockstep's DDP on 2 workers fed by real Fashion-MNIST
// batches from a PrefetchLoader (one loader thread per worker), with the share of the time
// training waited for data. And lockstep's DDP on 2 workers as replicas on threads of one
// process (run_replicas) against 2 processes, with the time from starting the program to
// the end of the first training step in both modes. And what recording the timeline costs a
// step on 2 workers (`ddp_cnn timeline-only` measures that alone). `ddp_cnn against-pytorch`
// runs only the rows that set lockstep beside PyTorch's DDP at 2 workers. `ddp_cnn global-batch`
// sets 2 workers fed batches of 64 each beside 2 workers fed a global batch of 128
// (SamplerOptions::global_batch_size), side by side.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/data/loader.h"
#include "lockstep/data/registry.h"
#include "lockstep/lockstep.h"
#include "lockstep/timeline.h"
#include "timeline/recorder.h"
#include "train/straggler_watch.h"
#include "median.h"
#include "run_world.h"

namespace {

using lockstep::bench::median;
using lockstep::bench::median_paired_ratio;
using lockstep::bench::run_world;
using lockstep::bench::run_world_line_times;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kBatch = 64, kWarmup = 5, kWindows = 7, kStepsPerWindow = 5, kRepeats = 7;

torch::nn::Sequential make_cnn() {
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Flatten(), torch::nn::Linear(3136, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
}

// Fashion-MNIST's training split, batched by a PrefetchLoader as a training job would read
// it: kBatch per worker, or with `global` kBatch times the workers per step over all of them.
std::unique_ptr<lockstep::data::PrefetchLoader> fashion_mnist_loader(bool global) {
  namespace data = lockstep::data;
  const auto registry = data::Registry::load_default();
  const size_t global_batch = global ? static_cast<size_t>(kBatch * lockstep::world_size()) : 0;
  auto options = data::LoaderOptions()
                     .sampler(data::SamplerOptions().batch_size(kBatch).global_batch_size(global_batch).seed(1))
                     .transform(data::compose({data::random_crop(28, 2), data::normalize({0.2860}, {0.3530})}))
                     .threads(1);
  return std::make_unique<data::PrefetchLoader>(data::open_dataset(registry.at("fashion-mnist"), "train"), options);
}

double timed_seconds(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Measured {
  double rate;          // samples per second, all workers together
  double waited_share;  // of the timed steps, the share spent waiting for data
};

// One worker's training loop; returns the median samples per second of all workers together.
Measured train(bool distributed, bool real_data = false, bool global_batch = false) {
  torch::nn::Sequential model;
  torch::Tensor x, y;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(0);
    model = make_cnn();
    x = torch::randn({kBatch, 1, 28, 28});
    y = torch::randint(0, 10, {kBatch});
  });
  std::unique_ptr<lockstep::DistributedDataParallel> ddp;
  if (distributed) ddp = std::make_unique<lockstep::DistributedDataParallel>(model);
  const int world = distributed ? lockstep::world_size() : 1;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const auto loader = real_data ? fashion_mnist_loader(global_batch) : nullptr;
  int64_t epoch = 0;
  auto step = [&] {
    if (loader) {
      auto batch = loader->next();
      if (!batch) {
        loader->set_epoch(++epoch);
        batch = loader->next();
      }
      x = batch->images, y = batch->labels;
    }
    optimizer.zero_grad();
    torch::cross_entropy_loss(model->forward(x), y).backward();
    optimizer.step();
  };
  for (int i = 0; i < kWarmup; ++i) step();
  std::vector<double> rates;
  double timed = 0, waited = 0;
  for (int w = 0; w < kWindows; ++w) {
    if (distributed) lockstep::barrier();
    const double waited_before = loader ? loader->waited().count() : 0;
    const auto start = Clock::now();
    for (int i = 0; i < kStepsPerWindow; ++i) step();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(kBatch * world * kStepsPerWindow / seconds);
    timed += seconds;
    waited += loader ? loader->waited().count() - waited_before : 0;
  }
  return {median(rates), waited / timed};
}

// lockstep's DDP at 1 worker against the plain loop in one process: windows of steps
// alternate between two identical models, one wrapped in DDP, in ABBA order, so that the
// machine's drift hits both alike. Returns the median over pairs of DDP's time over plain's.
double paired_overhead_at_one_worker() {
  lockstep::init();
  torch::manual_seed(0);
  auto plain = make_cnn();
  auto wrapped = make_cnn();
  lockstep::DistributedDataParallel ddp(wrapped);
  torch::optim::SGD plain_optimizer(plain->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::optim::SGD ddp_optimizer(wrapped->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const auto x = torch::randn({kBatch, 1, 28, 28});
  const auto y = torch::randint(0, 10, {kBatch});
  auto window = [&](torch::nn::Sequential& model, torch::optim::SGD& optimizer) {
    return timed_seconds([&] {
      for (int i = 0; i < kStepsPerWindow; ++i) {
        optimizer.zero_grad();
        torch::cross_entropy_loss(model->forward(x), y).backward();
        optimizer.step();
      }
    });
  };
  for (int i = 0; i < kWarmup; ++i) window(plain, plain_optimizer), window(wrapped, ddp_optimizer);
  const double ratio = median_paired_ratio(
      40, [&] { return window(wrapped, ddp_optimizer); }, [&] { return window(plain, plain_optimizer); });
  lockstep::shutdown();
  return ratio - 1;
}

// What recording the timeline costs `lockstep train` on 2 workers: one model, and windows of
// steps that alternate, in ABBA order, between recording (the Trainer's spans, DDP's buckets,
// the collectives, and the straggler watch's all_gather each step) and not. Returns the
// median over pairs of the recording window's time over the other's.
double paired_timeline_cost() {
  lockstep::init();
  torch::manual_seed(0);
  auto model = make_cnn();
  lockstep::DistributedDataParallel ddp(model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const auto x = torch::randn({kBatch, 1, 28, 28});
  const auto y = torch::randint(0, 10, {kBatch});
  const std::string prefix = fs::temp_directory_path() / ("lockstep-bench-timeline-" + std::to_string(getppid()));
  lockstep::timeline::start(prefix);
  lockstep::train::StragglerWatch watch{lockstep::ProcessGroup()};
  auto window = [&](bool recording) {
    lockstep::barrier();
    lockstep::timeline::detail::recording.store(recording);
    return timed_seconds([&] {
      for (int i = 0; i < kStepsPerWindow; ++i) {
        const auto started = Clock::now();
        lockstep::timeline::Span step("step");
        optimizer.zero_grad();
        torch::Tensor loss;
        {
          lockstep::timeline::Span forward("forward");
          loss = torch::cross_entropy_loss(model->forward(x), y);
        }
        {
          lockstep::timeline::Span backward("backward");
          loss.backward();
        }
        {
          lockstep::timeline::Span update("optimizer step");
          optimizer.step();
        }
        if (recording) {
          const double wait = ddp.last_gradient_wait_seconds();
          watch.add_step(0, std::chrono::duration<double>(Clock::now() - started).count() - wait, wait);
        }
      }
    });
  };
  for (int i = 0; i < kWarmup; ++i) window(true), window(false);
  const double ratio = median_paired_ratio(
      40, [&] { return window(true); }, [&] { return window(false); });
  lockstep::timeline::detail::recording.store(true);
  const std::string file = lockstep::timeline::stop();
  std::error_code ignored;
  fs::remove(file, ignored);
  lockstep::shutdown();
  return ratio;
}

// Seconds from LOCKSTEP_BENCH_START_NS (the steady clock, which every process shares, read
// by the parent just before it started this program) to the end of the first DDP step.
double seconds_to_first_step() {
  torch::nn::Sequential model;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(0);
    model = make_cnn();
  });
  lockstep::DistributedDataParallel ddp(model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  optimizer.zero_grad();
  torch::cross_entropy_loss(model->forward(torch::zeros({kBatch, 1, 28, 28})), torch::zeros({kBatch}, torch::kLong))
      .backward();
  optimizer.step();
  const auto started = std::chrono::nanoseconds(std::atoll(std::getenv("LOCKSTEP_BENCH_START_NS")));
  return std::chrono::duration<double>(Clock::now().time_since_epoch() - started).count();
}

// The perceptron example per step on 1 and 2 workers and as 2 independent processes (the
// machine's ceiling), medians of `repeats`; prints the speed-ups.
void time_perceptron(const std::string& perceptron, int repeats) {
  // Per step: from the end of the first epoch to the end of the last, as rank 0 prints
  // them, so that start-up does not count. Two independent processes on all the samples
  // each show what this machine gives two workers.
  auto seconds_per_step = [&](int workers, bool independent) {
    constexpr int kEpochs = 4;
    const auto ends = run_world_line_times(workers, {perceptron, "--epochs", std::to_string(kEpochs)}, independent);
    if (ends.size() != kEpochs)
      throw std::runtime_error(perceptron + " printed " + std::to_string(ends.size()) + " epoch ends, not " +
                               std::to_string(kEpochs));
    return (ends.back() - ends.front()) / ((kEpochs - 1) * (independent ? 10000 : 10000 / workers));
  };
  std::vector<double> ones, twos, pairs, of_ceiling;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    ones.push_back(seconds_per_step(1, false));
    twos.push_back(seconds_per_step(2, false));
    pairs.push_back(seconds_per_step(2, true));
    of_ceiling.push_back(pairs.back() / twos.back());
  }
  const double one = median(ones), two = median(twos), pair = median(pairs);
  std::printf(
      "\nperceptron example, time per step (one sample per worker, medians of %d): 1 worker %.0f µs, "
      "2 workers %.0f µs, 2 independent 1-worker processes %.0f µs\n",
      repeats, one * 1e6, two * 1e6, pair * 1e6);
  std::printf(
      "an epoch on 2 workers takes %.2fx the time of one on 1 (speed-up %.2fx); the machine's ceiling, "
      "2 independent processes, is a speed-up of %.2fx; the speed-up is %.2f of the ceiling\n",
      two / 2 / one, 2 * one / two, 2 * one / pair, pair / two);
  // The same within each repeat, where the VM's drifts between repeats cancel.
  std::printf("the speed-up as a share of the ceiling, median of the %d repeats' own: %.2f (repeats:", repeats,
              median(of_ceiling));
  for (double r : of_ceiling) std::printf(" %.2f", r);
  std::printf(")\n");
}

// `ddp_cnn global-batch`: 2 workers on real Fashion-MNIST batches, 64 each against a global
// batch of 128, back to back in each repeat; the median of the ratios.
int compare_global_batch(const std::string& self) {
  std::vector<double> per_worker, global, ratios;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    double a = 0, b = 0, waited = 0;
    std::sscanf(run_world(2, {self, "lockstep-data"}).c_str(), "%lf %lf", &a, &waited);
    std::sscanf(run_world(2, {self, "lockstep-data-global"}).c_str(), "%lf %lf", &b, &waited);
    per_worker.push_back(a);
    global.push_back(b);
    ratios.push_back(b / a);
  }
  std::printf("| configuration (2 workers, real Fashion-MNIST batches) | samples/s (median of %d runs) |\n|---|---:|\n",
              kRepeats);
  std::printf("| batch %d per worker | %.1f |\n| global batch %d | %.1f |\n", kBatch, median(per_worker), 2 * kBatch,
              median(global));
  std::printf("global batch / batch per worker: %.3fx (median of the ratios within each run)\n", median(ratios));
  return 0;
}

// `ddp_cnn against-pytorch`: only the rows that compare lockstep with PyTorch's DDP at 2
// workers, for setting one libtorch release beside another in little time.
int compare_with_pytorch(const std::string& self, const std::string& script) {
  const std::vector<std::pair<std::string, std::function<double()>>> configurations = {
      {"plain libtorch, 1 worker",
       [&] {
         return std::atof(run_world(1, {self, "plain"}).c_str());
       }},
      {"lockstep DDP, 2 workers",
       [&] {
         return std::atof(run_world(2, {self, "lockstep"}).c_str());
       }},
      {"PyTorch DDP, 2 workers",
       [&] {
         return std::atof(run_world(2, {"/usr/bin/python3", script}).c_str());
       }},
  };
  std::map<std::string, std::vector<double>> rates;
  std::vector<double> against_pytorch;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    std::map<std::string, double> r;
    for (const auto& [name, measure] : configurations) rates[name].push_back(r[name] = measure());
    against_pytorch.push_back(r["lockstep DDP, 2 workers"] / r["PyTorch DDP, 2 workers"]);
  }
  std::printf("| configuration | samples/s (median of %d runs) |\n|---|---:|\n", kRepeats);
  for (const auto& [name, measure] : configurations) std::printf("| %s | %.1f |\n", name.c_str(), median(rates[name]));
  std::printf("lockstep / PyTorch DDP at 2 workers: %.2fx (median of the ratios within each run)\n",
              median(against_pytorch));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "plain") return std::printf("%.1f\n", train(false).rate) < 0;
  if (role == "paired-overhead") return std::printf("%.5f\n", paired_overhead_at_one_worker()) < 0;
  if (role == "paired-timeline") {
    const double ratio = paired_timeline_cost();
    return std::getenv("RANK") != nullptr && std::string(std::getenv("RANK")) == "0" &&
           std::printf("%.5f\n", ratio) < 0;
  }
  if (role == "perceptron-only") {
    const std::string self = fs::canonical("/proc/self/exe");
    time_perceptron((fs::path(self).parent_path().parent_path() / "examples" / "perceptron").string(), 5);
    return 0;
  }
  if (role == "timeline-only") {
    std::vector<double> ratios;
    for (int repeat = 0; repeat < kRepeats; ++repeat) {
      ratios.push_back(std::atof(run_world(2, {fs::canonical("/proc/self/exe").string(), "paired-timeline"}).c_str()));
    }
    std::printf("timeline recording, 2 workers: step time %.4fx of not recording (median of %d runs; runs:",
                median(ratios), kRepeats);
    for (double r : ratios) std::printf(" %.4f", r);
    std::printf(")\n");
    return 0;
  }
  if (role == "lockstep-threads" || role == "first-step-threads") {
    std::vector<double> figures(2);
    const auto replicas_started = Clock::now().time_since_epoch();
    lockstep::run_replicas(
        2,
        [&](lockstep::ProcessGroup group) {
          figures[group.rank()] = role == "lockstep-threads" ? train(true).rate : seconds_to_first_step();
        },
        lockstep::ReplicaOptions().threads(1));
    // The first step also from the moment the replicas started, after this process loaded.
    const double loading =
        std::chrono::duration<double>(replicas_started -
                                      std::chrono::nanoseconds(std::atoll(std::getenv("LOCKSTEP_BENCH_START_NS"))))
            .count();
    return std::printf("%.5f %.5f\n", figures[0], figures[0] - loading) < 0;
  }
  if (role == "first-step") {
    lockstep::init();
    const double seconds = seconds_to_first_step();
    if (lockstep::rank() == 0) std::printf("%.5f\n", seconds);
    lockstep::shutdown();
    return 0;
  }
  if (role == "lockstep" || role == "lockstep-data" || role == "lockstep-data-global") {
    lockstep::init();
    const Measured measured = train(true, role != "lockstep", role == "lockstep-data-global");
    if (lockstep::rank() == 0) std::printf("%.1f %.5f\n", measured.rate, measured.waited_share);
    lockstep::shutdown();
    return 0;
  }

  const std::string self = fs::canonical("/proc/self/exe");
  const std::string script = (fs::path(LOCKSTEP_SOURCE_DIR) / "bench" / "ddp_cnn.py").string();
  const std::string perceptron = (fs::path(self).parent_path().parent_path() / "examples" / "perceptron").string();
  if (role == "against-pytorch") return compare_with_pytorch(self, script);
  if (role == "global-batch") return compare_global_batch(self);
  // Every repeat runs each configuration once, back to back; the figures are medians of the
  // ratios within a repeat, which cancels the machine's slower drifts.
  const std::vector<std::pair<std::string, std::function<double()>>> configurations = {
      {"plain libtorch, 1 worker",
       [&] {
         return std::atof(run_world(1, {self, "plain"}).c_str());
       }},
      // The same again: how far two runs of one program differ between processes.
      {"plain libtorch, 1 worker, again",
       [&] {
         return std::atof(run_world(1, {self, "plain"}).c_str());
       }},
      // Two plain loops at once, not talking: the most this machine gives 2 workers.
      {"plain libtorch, 2 independent processes",
       [&] {
         return 2 * std::atof(run_world(2, {self, "plain"}).c_str());
       }},
      {"lockstep DDP, 1 worker",
       [&] {
         return std::atof(run_world(1, {self, "lockstep"}).c_str());
       }},
      {"lockstep DDP, 2 workers",
       [&] {
         return std::atof(run_world(2, {self, "lockstep"}).c_str());
       }},
      {"lockstep DDP, 2 replicas on threads of 1 process",
       [&] {
         return std::atof(run_world(1, {self, "lockstep-threads"}).c_str());
       }},
      {"PyTorch DDP, 1 worker",
       [&] {
         return std::atof(run_world(1, {"/usr/bin/python3", script}).c_str());
       }},
      {"PyTorch DDP, 2 workers",
       [&] {
         return std::atof(run_world(2, {"/usr/bin/python3", script}).c_str());
       }},
  };
  std::map<std::string, std::vector<double>> rates;
  std::vector<double> efficiency, efficiency_vs_machine, against_pytorch, overhead, plain_vs_plain, paired,
      threads_vs_processes, first_step_threads, first_step_replicas, first_step_processes, timeline_cost;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    std::map<std::string, double> r;
    for (const auto& [name, measure] : configurations) rates[name].push_back(r[name] = measure());
    efficiency.push_back(r["lockstep DDP, 2 workers"] / (2 * r["lockstep DDP, 1 worker"]));
    efficiency_vs_machine.push_back(r["lockstep DDP, 2 workers"] / r["plain libtorch, 2 independent processes"]);
    against_pytorch.push_back(r["lockstep DDP, 2 workers"] / r["PyTorch DDP, 2 workers"]);
    overhead.push_back(r["plain libtorch, 1 worker"] / r["lockstep DDP, 1 worker"] - 1);
    plain_vs_plain.push_back(r["plain libtorch, 1 worker"] / r["plain libtorch, 1 worker, again"] - 1);
    paired.push_back(std::atof(run_world(1, {self, "paired-overhead"}).c_str()));
    timeline_cost.push_back(std::atof(run_world(2, {self, "paired-timeline"}).c_str()));
    threads_vs_processes.push_back(r["lockstep DDP, 2 replicas on threads of 1 process"] /
                                   r["lockstep DDP, 2 workers"]);
    double from_program = 0, from_replicas = 0;
    std::sscanf(run_world(1, {self, "first-step-threads"}).c_str(), "%lf %lf", &from_program, &from_replicas);
    first_step_threads.push_back(from_program);
    first_step_replicas.push_back(from_replicas);
    first_step_processes.push_back(std::atof(run_world(2, {self, "first-step"}).c_str()));
  }
  std::printf("| configuration | samples/s (median of %d runs) |\n|---|---:|\n", kRepeats);
  for (const auto& [name, measure] : configurations) std::printf("| %s | %.1f |\n", name.c_str(), median(rates[name]));
  std::printf("\nmedians of the ratios within each run:\n");
  std::printf("lockstep scaling efficiency at 2 workers: %.1f%% of 2x one worker, %.1f%% of 2 independent processes\n",
              100 * median(efficiency), 100 * median(efficiency_vs_machine));
  std::printf("lockstep / PyTorch DDP at 2 workers: %.2fx\n", median(against_pytorch));
  std::printf(
      "lockstep DDP overhead at 1 worker over plain libtorch, separate processes: %+.1f%% "
      "(plain against plain again, separate processes: %+.1f%%)\n",
      100 * median(overhead), 100 * median(plain_vs_plain));
  std::printf("lockstep DDP overhead at 1 worker over plain libtorch, paired in one process: %+.2f%%\n",
              100 * median(paired));
  std::printf("lockstep DDP at 2 workers, replicas on threads / processes: %.3fx\n", median(threads_vs_processes));
  std::printf(
      "lockstep DDP at 2 workers recording the timeline, paired in each process: %.4fx the step time of not "
      "recording\n",
      median(timeline_cost));
  std::printf(
      "to the end of the first step, 2 workers: threads %.3f s from starting the workers (run_replicas), "
      "%.3f s from starting the program; processes %.3f s from starting them\n",
      median(first_step_replicas), median(first_step_threads), median(first_step_processes));

  // The same training fed by the loader instead of one tensor held in memory.
  std::vector<double> data_rates, waited_shares;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    double rate = 0, share = 0;
    std::sscanf(run_world(2, {self, "lockstep-data"}).c_str(), "%lf %lf", &rate, &share);
    data_rates.push_back(rate);
    waited_shares.push_back(share);
  }
  std::printf(
      "\nlockstep DDP, 2 workers, Fashion-MNIST through PrefetchLoader (1 loader thread each): "
      "%.1f samples/s, training waited for data %.3f%% of the time (medians of %d runs)\n",
      median(data_rates), 100 * median(waited_shares), kRepeats);

  time_perceptron(perceptron, 3);
  return 0;
}
