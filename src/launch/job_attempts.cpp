#include "launch/job_attempts.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "job/elastic_keys.h"
#include "job/job_identity.h"
#include "job/store_values.h"
#include "launch/store_client.h"

#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

constexpr std::chrono::milliseconds kPollEvery{100};
// How long node 0 keeps the store up for launchers that have not ended, and after how long
// without beats one counts as gone.
constexpr std::chrono::seconds kStoreLingers{10};
constexpr std::chrono::milliseconds kSilentAfter{1500};

struct NodeRecord {
  int nnodes = 0;
  int nproc = 0;
  std::string host;
  std::string launcher;  // which launcher process wrote it (this_launcher())
};

std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

NodeRecord decode(const std::string& text) {
  std::istringstream in(text);
  NodeRecord record;
  in >> record.nnodes >> record.nproc >> record.host >> record.launcher;
  return record;
}

// One launcher process among all of the job's, over its whole life: a node's launcher
// started again is another one.
std::string this_launcher() {
  static const std::string id =
      this_host() + ":" + std::to_string(getpid()) + ":" + std::to_string(std::random_device()());
  return id;
}

std::string attempt_key(int attempt) { return "lockstep/attempt-" + std::to_string(attempt); }
std::string node_key(int attempt, int node) { return attempt_key(attempt) + "/nodes/" + std::to_string(node); }

std::string describe(int node, const NodeRecord& record) {
  return "node " + std::to_string(node) + " (on " + record.host + ")";
}

std::string seconds(std::chrono::milliseconds duration) { return std::to_string(duration.count() / 1000) + " s"; }

// Throws naming both values when `other` was started unlike this launcher.
void check_alike(const LaunchOptions& options, int other_node, const NodeRecord& other) {
  const std::string me = "this launcher, node " + std::to_string(options.node_rank) + ",";
  if (other.nnodes != options.nnodes) {
    throw ConfigError(me + " has --nnodes " + std::to_string(options.nnodes) + " but " + describe(other_node, other) +
                      " has --nnodes " + std::to_string(other.nnodes) + "; every node needs the same --nnodes");
  }
  if (other.nproc != options.nproc_per_node) {
    throw ConfigError(me + " has -n " + std::to_string(options.nproc_per_node) + " but " + describe(other_node, other) +
                      " has -n " + std::to_string(other.nproc) + "; every node needs the same -n");
  }
}

std::string beats_key(int node) { return "lockstep/launchers/" + std::to_string(node) + "/beats"; }
std::string ended_key(int node) { return "lockstep/launchers/" + std::to_string(node) + "/ended"; }
std::string launcher_beats_key(const std::string& launcher) { return "lockstep/launcher/" + launcher + "/beats"; }

}  // namespace

// This launcher's beats, from a thread and store connection of their own so that they go on
// whatever the launcher waits for; on a clean end it says so, so that it is not taken for lost.
class LauncherBeat {
 public:
  LauncherBeat(const std::string& host, int port, int node)
      : store_(connect_store_client(host, port, std::chrono::seconds(10))), node_(node) {
    add_beat();
    thread_ = std::thread([this] { beat(); });
  }
  ~LauncherBeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stop_.notify_all();
    thread_.join();
    try {
      if (!lost_) store_->set(ended_key(node_), bytes_of("1"));
    } catch (const std::exception&) {
    }
    (void)store_.release();  // left to the end of the process, as JobAttempts' own
  }

 private:
  void beat() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping_; })) {
      try {
        add_beat();
      } catch (const std::exception&) {
        lost_ = true;
        return;
      }
    }
  }

  // Counted per node, for the other nodes to watch, and per launcher, to tell this one from
  // the node's launcher before it.
  void add_beat() {
    store_->add(beats_key(node_), 1);
    store_->add(launcher_beats_key(this_launcher()), 1);
  }

  std::unique_ptr<c10d::TCPStore> store_;
  int node_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  bool lost_ = false;
  std::thread thread_;
};

JobAttempts::JobAttempts(const LaunchOptions& options, int store_port) : options_(options) {
  const std::string addr = master_addr_of(options);
  const auto unreachable = [&] {
    return TimeoutError("cannot reach node 0's store at " + addr + ":" + std::to_string(store_port) + " within " +
                        seconds(options.rdzv_timeout) +
                        " (--rdzv-timeout); is node 0's launcher running, and "
                        "--master-addr an address of it that this node can reach?");
  };
  try {
    store_ = connect_store_client(addr, store_port, options.rdzv_timeout);
  } catch (const std::exception&) {
    throw unreachable();
  }
  // Before this launcher writes anything there: the store may be another job's.
  claim_store_for_job(*store_, job_id_of(process_environment()),
                      "the launcher of node " + std::to_string(options.node_rank),
                      addr + ":" + std::to_string(store_port));
  try {
    beat_ = std::make_unique<LauncherBeat>(addr, store_port, options.node_rank);
  } catch (const std::exception&) {
    throw unreachable();
  }
}

// c10d's client can end the process from its destructor when its server has gone (node 0
// ended, which this launcher cannot know beforehand), so the clients are left to the end
// of the process.
JobAttempts::~JobAttempts() {
  beat_.reset();
  if (options_.node_rank == 0) keep_the_store_until_the_others_end();
  (void)store_.release();
}

// Node 0's launcher hosts the store: ending while another launcher still talks to it would
// end that one too (c10d aborts on a connection broken mid-call). So it waits, at most
// kStoreLingers, until each other launcher has said it ended or stopped beating.
void JobAttempts::keep_the_store_until_the_others_end() {
  const auto deadline = std::chrono::steady_clock::now() + kStoreLingers;
  std::vector<int64_t> last(options_.nnodes, -1);
  std::vector<std::chrono::steady_clock::time_point> changed(options_.nnodes, std::chrono::steady_clock::now());
  try {
    for (;;) {
      bool waiting = false;
      const auto now = std::chrono::steady_clock::now();
      for (int node = 1; node < options_.nnodes; ++node) {
        if (store_->check({ended_key(node)})) continue;
        const int64_t beats = store_->add(beats_key(node), 0);
        if (beats != last[node]) last[node] = beats, changed[node] = now;
        if (now - changed[node] < kSilentAfter) waiting = true;
      }
      if (!waiting || now >= deadline) return;
      std::this_thread::sleep_for(kPollEvery);
    }
  } catch (const std::exception&) {
  }
}

int JobAttempts::current() {
  return use_store([](c10d::TCPStore& store) { return static_cast<int>(store.add("lockstep/attempt", 0)); });
}

int JobAttempts::join(int attempt) {
  const std::string mine = node_key(attempt, options_.node_rank);
  if (store_->add(mine + "/taken", 1) > 1) {
    store_->wait({mine}, options_.rdzv_timeout);
    const NodeRecord holder = decode(text_of(store_->get(mine)));
    if (beating(holder.launcher)) {
      throw ConfigError("--node-rank " + std::to_string(options_.node_rank) + " is already taken by " +
                        describe(options_.node_rank, holder) + "; give every node its own --node-rank");
    }
    // Live recovery went on without that launcher's workers: this one's join the others.
    if (options_.recovery != "live") return join(after_lost_launcher(attempt, holder.host));
  }
  store_->set(mine, bytes_of(std::to_string(options_.nnodes) + " " + std::to_string(options_.nproc_per_node) + " " +
                             this_host() + " " + this_launcher()));
  const auto deadline = std::chrono::steady_clock::now() + options_.rdzv_timeout;
  std::vector<bool> seen(options_.nnodes, false);
  seen[options_.node_rank] = true;
  for (int missing = options_.nnodes - 1; missing > 0;) {
    for (int node = 0; node < options_.nnodes; ++node) {
      if (seen[node] || !store_->check({node_key(attempt, node)})) continue;
      check_alike(options_, node, decode(text_of(store_->get(node_key(attempt, node)))));
      seen[node] = true;
      --missing;
    }
    if (starts_without_the_rest(attempt, seen) || missing == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string nodes;
      for (int node = 0; node < options_.nnodes; ++node) {
        if (!seen[node]) nodes += (nodes.empty() ? "" : ", ") + std::to_string(node);
      }
      throw TimeoutError(
          std::string(missing == 1 ? "node " : "nodes ") + nodes +
          (attempt == 0 ? " did not start" : " did not come back for restart " + std::to_string(attempt)) + " within " +
          seconds(options_.rdzv_timeout) + " (--rdzv-timeout)");
    }
    std::this_thread::sleep_for(kPollEvery);
  }
  return attempt;
}

bool JobAttempts::starts_without_the_rest(int attempt, const std::vector<bool>& seen) {
  if (options_.min_nnodes == 0) return false;
  const std::string first = elastic::members_key(attempt, 0);
  if (store_->check({first})) return true;  // it started: this node's workers join it
  if (options_.node_rank != 0 || std::count(seen.begin(), seen.end(), true) < options_.min_nnodes) return false;
  std::string members;
  for (int node = 0; node < options_.nnodes; ++node) {
    if (!seen[node]) continue;
    for (int local = 0; local < options_.nproc_per_node; ++local) {
      const elastic::Member member{node * options_.nproc_per_node + local, 0};
      members += (members.empty() ? "" : " ") + elastic::member_name(member);
    }
  }
  store_->set(first, bytes_of(members));
  return true;
}

std::vector<int> JobAttempts::first_members(int attempt) {
  std::vector<int> ranks;
  if (options_.min_nnodes == 0) {
    for (int rank = 0; rank < options_.nnodes * options_.nproc_per_node; ++rank) ranks.push_back(rank);
    return ranks;
  }
  const std::string first = elastic::members_key(attempt, 0);
  store_->wait({first}, options_.rdzv_timeout);
  for (const elastic::Member& member : elastic::parse_members(text_of(store_->get(first)))) ranks.push_back(member.id);
  return ranks;
}

bool JobAttempts::beating(const std::string& launcher) {
  const int64_t before = store_->add(launcher_beats_key(launcher), 0);
  // Twice the silence that counts a node as gone: a live launcher on a loaded machine beats
  // within it, and only a new launcher of a taken node waits for it.
  std::this_thread::sleep_for(2 * kSilentAfter);
  return store_->add(launcher_beats_key(launcher), 0) != before;
}

// This node's launcher before this one is gone, and `attempt` runs on without its workers
// (the others may not have noticed yet): it fails, and this launcher joins the next one.
int JobAttempts::after_lost_launcher(int attempt, const std::string& its_host) {
  fail(attempt, "its launcher was started again: the one before it (on " + its_host + ") is gone with its workers");
  if (attempt >= options_.max_restarts) {
    throw ConfigError("node " + std::to_string(options_.node_rank) +
                      "'s launcher before this one is gone, and the "
                      "job has no restart left to start it again (--max-restarts " +
                      std::to_string(options_.max_restarts) + ")");
  }
  return attempt + 1;
}

void JobAttempts::fail(int attempt, const std::string& cause) {
  use_store([&](c10d::TCPStore& store) {
    if (store.add(attempt_key(attempt) + "/failures", 1) != 1) return;  // another node said it first
    store.set(attempt_key(attempt) + "/failed",
              bytes_of("node " + std::to_string(options_.node_rank) + " (on " + this_host() + "): " + cause));
    store.add("lockstep/attempt", 1);
  });
}

std::optional<std::string> JobAttempts::silent_node(int attempt, std::chrono::milliseconds timeout) {
  const std::vector<int> silent = silent_nodes(attempt, timeout);
  if (silent.empty()) return std::nullopt;
  beats_.clear();
  return stopped_answering(attempt, silent.front(), timeout) + ": its launcher is gone or cut off from node 0";
}

std::vector<int> JobAttempts::silent_nodes(int attempt, std::chrono::milliseconds timeout) {
  return use_store([&](c10d::TCPStore& store) {
    const auto now = std::chrono::steady_clock::now();
    if (beats_.size() != static_cast<size_t>(options_.nnodes)) beats_.assign(options_.nnodes, Beats{-1, now});
    std::vector<int> silent;
    for (int node = 0; node < options_.nnodes; ++node) {
      if (node == options_.node_rank || store.check({ended_key(node)})) continue;
      if (!store.check({node_key(attempt, node)})) continue;  // not come yet (--nnodes MIN:MAX)
      const int64_t count = store.add(beats_key(node), 0);
      if (count != beats_[node].count) {
        beats_[node] = {count, now};
      } else if (now - beats_[node].changed > timeout) {
        silent.push_back(node);
      }
    }
    return silent;
  });
}

std::string JobAttempts::stopped_answering(int attempt, int node, std::chrono::milliseconds timeout) {
  return use_store([&](c10d::TCPStore& store) {
    return describe(node, decode(text_of(store.get(node_key(attempt, node))))) + " stopped answering for " +
           seconds(timeout);
  });
}

std::string JobAttempts::lost_nodes(int attempt, std::chrono::milliseconds wait) {
  return use_store([&](c10d::TCPStore& store) {
    std::vector<int64_t> before(options_.nnodes);
    for (int node = 0; node < options_.nnodes; ++node) before[node] = store.add(beats_key(node), 0);
    std::this_thread::sleep_for(wait);
    std::string lost;
    for (int node = 0; node < options_.nnodes; ++node) {
      if (node == options_.node_rank || store.check({ended_key(node)})) continue;
      if (store.add(beats_key(node), 0) != before[node]) continue;
      lost += (lost.empty() ? "" : "; ") + describe(node, decode(text_of(store.get(node_key(attempt, node))))) +
              " is lost: its launcher stopped answering";
    }
    return lost;
  });
}

std::optional<std::string> JobAttempts::failed_elsewhere(int attempt) {
  return use_store([&](c10d::TCPStore& store) -> std::optional<std::string> {
    const std::string key = attempt_key(attempt) + "/failed";
    if (!store.check({key})) return std::nullopt;
    return text_of(store.get(key));
  });
}

}  // namespace lockstep::launch
