// What taking steps in lockstep costs on this machine by itself, with no communication
// at all: the bound for any per-step synchronous data parallelism, against which
// bench/ddp_cnn's perceptron figures read.
//
//   bench/sync_floor               two CPUs or more
//   taskset -c 0 bench/sync_floor  both processes on one CPU
//
// It runs the perceptron example's step loop (same model, one sample per step) in plain
// libtorch as 2 processes started side by side, each a fresh program, as `lockstep run`
// starts its workers:
// - independently, recording every step's time. A pair in lockstep steps at the pace of
//   the slower of its two steps, so the mean of the per-step maximum against the mean step
//   is what a synchronisation costing nothing would reach of the ceiling.
// - on one CPU, where a step's time includes the other process's, instead taking turns
//   every 2 steps through a shared flag (the pattern that two ranks waiting for each other
//   settle into there): the time per pair of steps against two independent processes'
//   shows what switching between two processes costs. Once as
//   fresh programs, and once forked from this one after libtorch started, so that its
//   state is shared copy-on-write: the difference is the cost of each process bringing
//   its own copy of that state back into the caches.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "median.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSteps = 10000, kRepeats = 5, kTurnEvery = 2;

struct Turn {
  std::atomic<int> whose{0};
};

struct Pass {
  double seconds = 0;         // wall time
  std::vector<double> steps;  // each step's time, µs
};

// The perceptron example's loop on all 10000 samples, twice: returns the second pass, the
// first being warm-up. With `turn`, waits for its turn every kTurnEvery steps and then
// hands it on.
Pass train(int me, Turn* turn) {
  at::set_num_threads(1);
  torch::manual_seed(42);
  const auto x = torch::rand({kSteps, 10}) + 1;
  const auto y = x.pow(3).sum(1, /*keepdim=*/true);
  torch::nn::Sequential model(torch::nn::Linear(10, 100), torch::nn::ReLU(), torch::nn::Linear(100, 1));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-4).momentum(0.9));
  Pass pass;
  Clock::time_point pass_start;
  for (int i = 0; i < 2 * kSteps; ++i) {
    if (i == kSteps) pass_start = Clock::now();
    if (turn != nullptr && i % kTurnEvery == 0) {
      while (turn->whose.load() != me) sched_yield();
    }
    const auto start = Clock::now();
    optimizer.zero_grad();
    torch::mse_loss(model->forward(x[i % kSteps].unsqueeze(0)), y[i % kSteps].unsqueeze(0)).backward();
    optimizer.step();
    if (i >= kSteps) pass.steps.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (turn != nullptr && i % kTurnEvery == kTurnEvery - 1) turn->whose.store(1 - me);
  }
  pass.seconds = std::chrono::duration<double>(Clock::now() - pass_start).count();
  if (turn != nullptr) turn->whose.store(1 - me);  // the other may have steps left
  return pass;
}

int worker(int me, const std::string& out, const char* turn_file);

// Runs train() in 2 processes at once and returns each one's second pass. `fresh`: this
// program exec'd again, nothing of libtorch's state shared, as between a launcher's
// workers; else forked from this process.
std::vector<Pass> run_pair(bool turns, bool fresh = true) {
  const std::string self = std::filesystem::canonical("/proc/self/exe");
  const std::string dir = std::filesystem::temp_directory_path() / ("lockstep-sync-floor-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string turn_file = dir + "/turn";
  if (turns) std::ofstream(turn_file).write(std::string(sizeof(Turn), '\0').data(), sizeof(Turn));
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string out = dir + "/" + std::to_string(r);
      if (!fresh) _exit(worker(r, out, turns ? turn_file.c_str() : nullptr));
      execl(self.c_str(), self.c_str(), "worker", std::to_string(r).c_str(), out.c_str(),
            turns ? turn_file.c_str() : nullptr, nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  std::vector<Pass> passes(2);
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir + "/" + std::to_string(r));
    in >> passes[r].seconds;
    for (double t; in >> t;) passes[r].steps.push_back(t);
  }
  std::filesystem::remove_all(dir);
  if (passes[0].steps.size() != kSteps || passes[1].steps.size() != kSteps) {
    std::fprintf(stderr, "sync_floor: a worker did not finish its steps\n");
    std::exit(1);
  }
  return passes;
}

int worker(int me, const std::string& out, const char* turn_file) {
  Turn* turn = nullptr;
  if (turn_file != nullptr) {
    FILE* f = std::fopen(turn_file, "r+");
    if (f == nullptr) return 1;
    turn = static_cast<Turn*>(mmap(nullptr, sizeof(Turn), PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0));
    if (turn == MAP_FAILED) return 1;
  }
  const Pass pass = train(me, turn);
  std::ofstream file(out);
  file << pass.seconds << "\n";
  for (double t : pass.steps) file << t << "\n";
  return 0;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "worker")
    return worker(std::atoi(argv[2]), argv[3], argc > 4 ? argv[4] : nullptr);
  cpu_set_t allowed;
  sched_getaffinity(0, sizeof allowed, &allowed);
  const bool one_cpu = CPU_COUNT(&allowed) == 1;

  if (one_cpu) torch::ones({1}).add_(1);  // libtorch started: forked workers share its state
  std::vector<double> floors, turn_shares, forked_turn_shares;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    const auto independent = run_pair(false);
    if (one_cpu) {
      // Both processes share the CPU: a pass's wall time is kSteps pairs of steps (and a
      // step's own time includes the other's, so no floor comes from them).
      const double apart = independent[0].seconds, turns = run_pair(true)[0].seconds;
      const double forked_turns = run_pair(true, /*fresh=*/false)[0].seconds;
      turn_shares.push_back(apart / turns);
      forked_turn_shares.push_back(apart / forked_turns);
      std::printf(
          "on one CPU, µs per pair of steps: independent %.1f, taking turns every %d steps %.1f, "
          "the same forked %.1f\n",
          apart / kSteps * 1e6, kTurnEvery, turns / kSteps * 1e6, forked_turns / kSteps * 1e6);
      continue;
    }
    std::vector<double> slower(kSteps);
    for (int i = 0; i < kSteps; ++i) slower[i] = std::max(independent[0].steps[i], independent[1].steps[i]);
    const double alone = (mean(independent[0].steps) + mean(independent[1].steps)) / 2;
    floors.push_back(alone / mean(slower));
    std::printf("independent: mean step %.1f and %.1f µs; the slower of each pair of steps %.1f µs\n",
                mean(independent[0].steps), mean(independent[1].steps), mean(slower));
  }
  if (one_cpu) {
    std::printf(
        "\ntwo processes taking turns on one CPU every %d steps, no communication: %.2f of the ceiling as "
        "fresh programs, %.2f forked (medians of %d runs)\n",
        kTurnEvery, lockstep::bench::median(turn_shares), lockstep::bench::median(forked_turn_shares), kRepeats);
  } else {
    std::printf("\nstepping in lockstep with no cost of its own reaches %.2f of the ceiling (median of %d runs)\n",
                lockstep::bench::median(floors), kRepeats);
  }
  return 0;
}
