#include "support/rank_bytes.h"

#include <algorithm>

namespace lockstep::testing {
namespace {

int failure_count = 0;

}  // namespace

void fail(const std::string& what) {
  ++failure_count;
  std::cerr << "rank " << lockstep::rank() << ": " << what << std::endl;
}

int failures() { return failure_count; }

// ---- comparing ranks exactly: everything compared is turned into bytes ----

void add(std::string& bytes, int64_t value) { bytes.append(reinterpret_cast<char*>(&value), 8); }
void add(std::string& bytes, double value) { bytes.append(reinterpret_cast<char*>(&value), 8); }

void add(std::string& bytes, const torch::Tensor& t) {
  if (!t.defined()) {
    bytes += "undefined;";
    return;
  }
  bytes += std::string(c10::toString(t.scalar_type())) + c10::str(t.sizes()) + ":";
  const torch::Tensor c = t.detach().cpu().contiguous();
  bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

std::string module_bytes(const torch::nn::Module& module) {
  std::string bytes;
  for (const auto& p : module.named_parameters()) {
    bytes += p.key();
    add(bytes, p.value());
  }
  for (const auto& b : module.named_buffers()) {
    bytes += b.key();
    add(bytes, b.value());
  }
  return bytes;
}

// Every rank's bytes, by rank (padded to the longest for all_gather, then trimmed).
std::vector<std::string> gather(const std::string& mine) {
  const auto lengths = lockstep::all_gather(torch::tensor({static_cast<int64_t>(mine.size())}));
  int64_t longest = 0;
  for (const auto& l : lengths) longest = std::max(longest, l.item<int64_t>());
  torch::Tensor padded = torch::zeros({longest}, torch::kByte);
  std::copy(mine.begin(), mine.end(), padded.data_ptr<uint8_t>());
  std::vector<std::string> all;
  const auto parts = lockstep::all_gather(padded);
  for (size_t r = 0; r < parts.size(); ++r) {
    const char* data = reinterpret_cast<const char*>(parts[r].data_ptr<uint8_t>());
    all.emplace_back(data, data + lengths[r].item<int64_t>());
  }
  return all;
}

void expect_same_as_root(int root, const std::string& mine, const std::string& what) {
  if (gather(mine)[root] != mine) fail(what + " differs from rank " + std::to_string(root) + "'s");
}

// ---- a model with parameters and buffers ----

NetImpl::NetImpl(int64_t outputs)
    : fc1(register_module("fc1", torch::nn::Linear(6, 8))),
      bn(register_module("bn", torch::nn::BatchNorm1d(8))),
      fc2(register_module("fc2", torch::nn::Linear(8, outputs))) {}

torch::Tensor NetImpl::forward(const torch::Tensor& x) { return fc2(torch::tanh(bn(fc1(x)))); }

Batch batch(int64_t seed, int64_t size) {
  torch::manual_seed(seed);
  Batch b;
  b.x = torch::randn({size, 6});
  b.y = torch::randn({size, 4});
  return b;
}

void train_step(Net& net, torch::optim::Optimizer& optimizer, int64_t seed) {
  const Batch b = batch(seed);
  optimizer.zero_grad();
  torch::mse_loss(net->forward(b.x), b.y).backward();
  optimizer.step();
}

int run_scenario(int argc, char** argv, const std::map<std::string, std::function<void(int root)>>& scenarios) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int root = argc > 2 ? std::stoi(argv[2]) : 0;
  torch::set_num_threads(1);  // ranks share two cores; and identical inputs give identical bytes
  try {
    lockstep::init();
    const auto found = scenarios.find(scenario);
    if (found == scenarios.end()) {
      std::cerr << "unknown scenario '" << scenario << "'" << std::endl;
      return 2;
    }
    found->second(root);
    if (failures() > 0) return 1;
    std::cout << "rank " << lockstep::rank() << " of " << lockstep::world_size() << ": " << scenario << " correct"
              << std::endl;
    lockstep::shutdown();
  } catch (const std::exception& e) {
    std::cerr << e.what() << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace lockstep::testing
