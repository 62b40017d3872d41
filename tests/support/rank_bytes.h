#pragma once

// What the synchronize workers share: every rank's values turned into bytes and compared
// with the root's, exactly; a small model with parameters and buffers; and the failures a
// worker prints before it exits non-zero.
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/lockstep.h"

namespace lockstep::testing {

/// Says `what` went wrong on this rank; the worker then exits non-zero.
void fail(const std::string& what);
/// How many fail() calls there were.
int failures();

void add(std::string& bytes, int64_t value);
void add(std::string& bytes, double value);
void add(std::string& bytes, const torch::Tensor& t);
/// A module's parameters and buffers, by name, as bytes.
std::string module_bytes(const torch::nn::Module& module);
/// Every rank's bytes, by rank.
std::vector<std::string> gather(const std::string& mine);
void expect_same_as_root(int root, const std::string& mine, const std::string& what);

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t outputs);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Net);

struct Batch {
  torch::Tensor x, y;
};
Batch batch(int64_t seed, int64_t size = 8);
void train_step(Net& net, torch::optim::Optimizer& optimizer, int64_t seed);

// Runs `body`, which must throw T on every rank: prints the message for the test to check.
template <typename T, typename F>
void expect_error(const std::string& what, F&& body) {
  try {
    body();
  } catch (const T& e) {
    std::cout << "rank " << lockstep::rank() << " " << what << ": " << e.what() << std::endl;
    return;
  } catch (const std::exception& e) {
    fail(what + ": wrong exception: " + e.what());
    return;
  }
  fail(what + ": no exception");
}

/// A synchronize worker's main: joins the job, runs scenarios.at(argv[1]) with the root in
/// argv[2] (0 when left out), and says "rank R of N: SCENARIO correct" when nothing failed.
/// The exit status: 0, 1 after a failure, 2 for an unknown scenario.
int run_scenario(int argc, char** argv, const std::map<std::string, std::function<void(int root)>>& scenarios);

}  // namespace lockstep::testing
