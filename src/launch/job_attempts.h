#pragma once

#include <chrono>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include "launch/launch_options.h"

namespace c10d {
class TCPStore;
}

namespace lockstep::launch {

class LauncherBeat;

/// What the launchers of one job agree on through its store (hosted by node 0's launcher):
/// which attempt of the job runs, which nodes have joined it, and whether one of them saw it
/// fail. Every launcher runs the same attempts; when any node's worker fails, every node
/// stops its workers and, while --max-restarts allows, all start the next attempt together.
/// A launcher that is started again after its node was lost joins the attempt in progress.
///
/// Losing node 0 loses the store, and with it the job: the others end, saying so.
class JobAttempts {
 public:
  /// Connects to the store, waiting up to options.rdzv_timeout for it. Throws TimeoutError.
  JobAttempts(const LaunchOptions& options, int store_port);
  ~JobAttempts();

  /// The attempt the job is in (0 at first).
  int current();

  /// Registers this node's rank, --nnodes and -n for `attempt`, and waits up to
  /// options.rdzv_timeout until every node has; returns the attempt joined. Launchers started
  /// inconsistently fail within moments, with one line naming both values: two live ones with
  /// one --node-rank, or different --nnodes or -n (ConfigError). Nodes that never come are
  /// named (TimeoutError). Where this node's launcher before this one took `attempt` and is
  /// gone, `attempt` fails (its workers are gone too) and this launcher joins the next.
  /// Under live recovery a node's launcher started again joins the attempt in progress (its
  /// workers join the others), and with --nnodes MIN:MAX the attempt starts once MIN nodes
  /// came: node 0's launcher records the first generation (the members of the nodes there),
  /// and a node that comes later joins it.
  int join(int attempt);
  /// Live recovery's first generation of `attempt`, as launched ranks: every rank, or with
  /// --nnodes MIN:MAX those of the nodes that started it (waiting for node 0's record).
  std::vector<int> first_members(int attempt);

  /// Tells the other nodes that `attempt` failed because of `cause` (the first report counts).
  void fail(int attempt, const std::string& cause);
  /// Another node's report that `attempt` failed: "node 1 (on host): rank 3 (pid 42) ...".
  std::optional<std::string> failed_elsewhere(int attempt);

  /// A node whose launcher has not beaten for `timeout` (cut off, or its machine gone) and
  /// did not end on its own. Called about twice a second while the workers run.
  std::optional<std::string> silent_node(int attempt, std::chrono::milliseconds timeout);
  /// Every node silent so, for live recovery, which goes on without them; each call after
  /// the first names a node again while it stays silent.
  std::vector<int> silent_nodes(int attempt, std::chrono::milliseconds timeout);
  /// "node 1 (on host-b) stopped answering for 3 s".
  std::string stopped_answering(int attempt, int node, std::chrono::milliseconds timeout);
  /// The nodes whose launchers do not beat over the next `wait` and did not end on their own:
  /// "node 1 (on host-b) is lost: ...", or "" (what a worker failure may have come from).
  std::string lost_nodes(int attempt, std::chrono::milliseconds wait);

 private:
  void keep_the_store_until_the_others_end();
  /// Whether `launcher` (a NodeRecord's) still beats.
  bool beating(const std::string& launcher);
  int after_lost_launcher(int attempt, const std::string& its_host);
  /// --nnodes MIN:MAX: whether `attempt` starts, or started, without the nodes not `seen`.
  bool starts_without_the_rest(int attempt, const std::vector<bool>& seen);
  /// Runs `use` on the store (what lambdas below take as `store`).
  template <typename Use>
  auto use_store(Use use) {
    return use(*store_);
  }

  const LaunchOptions& options_;
  std::unique_ptr<c10d::TCPStore> store_;
  std::unique_ptr<LauncherBeat> beat_;  // this launcher's, for the others to watch
  struct Beats {
    int64_t count = -1;
    std::chrono::steady_clock::time_point changed;
  };
  std::vector<Beats> beats_;  // other launchers', per node
};

}  // namespace lockstep::launch
