#include "launch/node_registration.h"

#include <unistd.h>

#include <sstream>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "lockstep/comm/error.h"

namespace lockstep::launch {
namespace {

constexpr std::chrono::milliseconds kPollEvery{100};

struct NodeRecord {
  int nnodes = 0;
  int nproc = 0;
  std::string host;
};

std::string encode(const LaunchOptions& options) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::to_string(options.nnodes) + " " + std::to_string(options.nproc_per_node) + " " + host;
}

NodeRecord decode(const std::vector<uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  NodeRecord record;
  in >> record.nnodes >> record.nproc >> record.host;
  return record;
}

std::string key_of(int node) { return "lockstep/nodes/" + std::to_string(node); }

std::string describe(int node, const NodeRecord& record) {
  return "node " + std::to_string(node) + " (on " + record.host + ")";
}

// Throws naming both values when `other` was started unlike this launcher.
void check_alike(const LaunchOptions& options, int other_node, const NodeRecord& other) {
  const NodeRecord mine{options.nnodes, options.nproc_per_node, ""};
  const std::string me = "this launcher, node " + std::to_string(options.node_rank) + ",";
  if (other.nnodes != mine.nnodes) {
    throw ConfigError(me + " has --nnodes " + std::to_string(mine.nnodes) + " but " + describe(other_node, other) +
                      " has --nnodes " + std::to_string(other.nnodes) + "; every node needs the same --nnodes");
  }
  if (other.nproc != mine.nproc) {
    throw ConfigError(me + " has -n " + std::to_string(mine.nproc) + " but " + describe(other_node, other) +
                      " has -n " + std::to_string(other.nproc) + "; every node needs the same -n");
  }
}

}  // namespace

void register_node(const LaunchOptions& options, int store_port) {
  if (options.nnodes == 1) return;
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(store_port);
  store_options.isServer = false;
  store_options.waitWorkers = false;
  store_options.timeout = options.rdzv_timeout;
  const std::string addr = master_addr_of(options);
  std::unique_ptr<c10d::TCPStore> store;
  try {
    store = std::make_unique<c10d::TCPStore>(addr, store_options);
  } catch (const std::exception& e) {
    throw TimeoutError("cannot reach node 0's store at " + addr + ":" + std::to_string(store_port) + " within " +
                       std::to_string(options.rdzv_timeout.count() / 1000) + " s (--rdzv-timeout); is node 0's "
                       "launcher running, and --master-addr an address of it that this node can reach?");
  }
  const std::string mine = key_of(options.node_rank);
  if (store->add(mine + "/taken", 1) > 1) {
    store->wait({mine}, options.rdzv_timeout);
    throw ConfigError("--node-rank " + std::to_string(options.node_rank) + " is already taken by " +
                      describe(options.node_rank, decode(store->get(mine))) + "; give every node its own --node-rank");
  }
  const std::string record = encode(options);
  store->set(mine, std::vector<uint8_t>(record.begin(), record.end()));

  const auto deadline = std::chrono::steady_clock::now() + options.rdzv_timeout;
  std::vector<bool> seen(options.nnodes, false);
  seen[options.node_rank] = true;
  for (int missing = options.nnodes - 1; missing > 0;) {
    for (int node = 0; node < options.nnodes; ++node) {
      if (seen[node] || !store->check({key_of(node)})) continue;
      check_alike(options, node, decode(store->get(key_of(node))));
      seen[node] = true;
      --missing;
    }
    if (missing == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string nodes;
      for (int node = 0; node < options.nnodes; ++node) {
        if (!seen[node]) nodes += (nodes.empty() ? "" : ", ") + std::to_string(node);
      }
      throw TimeoutError("node(s) " + nodes + " did not start within " +
                         std::to_string(options.rdzv_timeout.count() / 1000) + " s (--rdzv-timeout)");
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

}  // namespace lockstep::launch
