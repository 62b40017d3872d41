#include "launch/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include "job/elastic_keys.h"
#include "job/store_values.h"
#include "launch/agent_store.h"
#include "launch/store_client.h"
#include "launch/heartbeat_monitor.h"
#include "job/cpu_topology.h"
#include "launch/mpirun_command.h"
#include "launch/job_attempts.h"
#include "launch/signal_inbox.h"
#include "launch/worker_environment.h"
#include "launch/worker_group.h"
#include "launch/worker_process.h"
#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

// Shell convention for a command that could not be executed.
constexpr int kCannotRunStatus = 127;

// How long the other launchers get to show they still beat, after a worker failed.
constexpr std::chrono::seconds kLostAfter{2};

void report(const std::string& line) { std::cerr << "lockstep run: " << line << std::endl; }

// This node's ranks in the job.
std::vector<int> ranks_of_node(const LaunchOptions& options) {
  std::vector<int> ranks;
  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    ranks.push_back(options.node_rank * options.nproc_per_node + local_rank);
  }
  return ranks;
}

CoreBinding binding_of(const LaunchOptions& options) {
  if (options.bind == "none") return {};
  CoreBinding binding = bind_to_cores(options.nproc_per_node, allowed_cpus());
  // Only asked-for binding that cannot be had is worth a line; by default it binds when it fits.
  if (!binding.unbound_why.empty() && options.bind == "core") report(binding.unbound_why);
  return binding;
}

// One node's launcher: starts its workers for each attempt of the job, supervises them, and
// starts every worker afresh after a failure while --max-restarts allows.
class Launcher {
 public:
  explicit Launcher(const LaunchOptions& options)
      : options_(options),
        store_port_(options.master_port.value_or(0)),
        inherited_(current_environment()),
        terminal_(isatty(STDOUT_FILENO) != 0),
        ranks_(ranks_of_node(options)) {
    if (options.node_rank == 0) {
      store_ = std::make_unique<AgentStore>(master_addr_of(options), store_port_);
      store_port_ = store_->port();
    }
    attempts_.emplace(options, store_port_);
    binding_ = binding_of(options);
  }

  // c10d's clients may end the process once their server is gone, and those of this launcher
  // are left to the end of the process; so is the server, or a client's reader thread could
  // see it close (connection reset) while the process exits, and abort it.
  ~Launcher() {
    (void)live_store_.release();
    (void)store_.release();
  }

  int run() {
    std::string last_failure;  // of the attempt before, for the workers of the next
    // A launcher started again after its node was lost joins the attempt in progress.
    for (int attempt = attempts_->current();; ++attempt) {
      const int asked = attempt;
      attempt = attempts_->join(attempt);
      if (attempt != asked) {
        report("restart " + std::to_string(attempt) + " of " + std::to_string(options_.max_restarts) +
               ": this node's launcher before this one is gone, and with it its workers of the job");
        last_failure = attempts_->failed_elsewhere(attempt - 1).value_or("");  // what its workers are told
      }
      WorkerGroup workers(options_.stop_timeout, terminal_);
      const bool live = options_.recovery == "live";
      if (live) {
        live_store_ = connect_store_client(master_addr_of(options_), store_port_, std::chrono::seconds(10));
      }
      start_workers(workers, attempt, last_failure);
      if (live) recover_live(workers, attempt);
      const int status = supervise(workers, attempt);
      if (status != 0 && store_lost_) return store_gone(status);
      if (live) return status;  // its workers went on, or could not
      // Only a failure is worth a restart: not success, a stop the launcher was asked for, or
      // a program that cannot run at all.
      if (status == 0 || !workers.failure() || status == kCannotRunStatus) return status;
      const std::optional<std::string> failure = record_failure(attempt, *workers.failure());
      if (!failure) return store_gone(status);
      if (attempt == options_.max_restarts) {
        if (options_.max_restarts > 0) {
          report("the job failed " + std::to_string(attempt + 1) + " times, which --max-restarts " +
                 std::to_string(options_.max_restarts) + " allows no more; the last failure: " + *failure);
        }
        return status;
      }
      report("restart " + std::to_string(attempt + 1) + " of " + std::to_string(options_.max_restarts) +
             ": starting every worker afresh after " + *failure);
      last_failure = *failure;
    }
  }

 private:
  void start_workers(WorkerGroup& workers, int attempt, const std::string& last_failure) {
    const bool live = options_.recovery == "live";
    const std::vector<int> first = live ? attempts_->first_members(attempt) : std::vector<int>();
    for (int local_rank = 0; local_rank < options_.nproc_per_node; ++local_rank) {
      WorkerRanks place{ranks_[local_rank], local_rank};
      try {
        if (live) {
          place.incarnation = next_incarnation(attempt, place.rank);
          const auto at = std::find(first.begin(), first.end(), place.rank);
          place.joins = at == first.end() || place.incarnation > 0;
          if (options_.min_nnodes > 0 && !place.joins) {
            place.first_generation = {static_cast<int>(at - first.begin()), static_cast<int>(first.size())};
          }
        }
        workers.add(
            place.rank,
            spawn_worker(options_.command,
                         worker_environment(inherited_, options_, place, store_port_, attempt, terminal_, last_failure),
                         binding_.cpus.empty() ? -1 : binding_.cpus[local_rank]),
            place.incarnation);
      } catch (const std::exception& error) {  // the store's errors too
        workers.abandon(kCannotRunStatus, "rank " + std::to_string(place.rank) + ": " + error.what());
        break;
      }
    }
  }

  // A worker that ends is marked so in the store (the evidence the others regroup on); one
  // that failed is started again while restarts are left, and rejoins them.
  void recover_live(WorkerGroup& workers, int attempt) {
    WorkerGroup::LiveRecovery live;
    live.ended = [this, attempt](int rank, int incarnation) {
      if (store_lost_) return;  // the others went on without this node's workers
      try {
        mark_ended(attempt, {rank, incarnation});
      } catch (const std::exception& e) {
        report("cannot tell the others that rank " + std::to_string(rank) + " ended: " + e.what());
      }
    };
    live.replace = [this, attempt](int rank) -> std::optional<WorkerGroup::Started> {
      if (restarts_used_ >= options_.max_restarts || store_lost_) return std::nullopt;  // it could not join
      ++restarts_used_;
      WorkerRanks place{rank, rank - ranks_.front(), next_incarnation(attempt, rank)};
      place.joins = true;
      return WorkerGroup::Started{
          spawn_worker(options_.command,
                       worker_environment(inherited_, options_, place, store_port_, attempt, terminal_, ""),
                       binding_.cpus.empty() ? -1 : binding_.cpus[place.local_rank]),
          place.incarnation};
    };
    workers.recover_live(std::move(live));
  }

  // Each start of a worker under live recovery is a new member: 0, 1, ... for its rank,
  // counted in the store, so that a node's launcher started again does not reuse one.
  int next_incarnation(int attempt, int rank) {
    return static_cast<int>(live_store_->add(elastic::elastic_key(attempt, "starts/" + std::to_string(rank)), 1) - 1);
  }

  void mark_ended(int attempt, const elastic::Member& member) {
    const std::string key = elastic::ended_key(attempt, member);
    if (live_store_->check({key})) return;
    live_store_->set(key, bytes_of("1"));
    live_store_->add(elastic::ended_count_key(attempt), 1);  // what the members watch
  }

  // Live recovery goes on without a node that stopped answering (cut off, or its machine
  // gone): its workers in the latest generation are marked ended, as their launcher would
  // have, so that the others' collectives waiting on them are aborted and the others regroup.
  // Again at each poll while it stays silent: a generation may form meanwhile.
  void end_workers_of_silent_nodes(int attempt) {
    const std::vector<int> silent = attempts_->silent_nodes(attempt, options_.heartbeat_timeout);
    for (int node : silent) {
      if (std::find(silent_before_.begin(), silent_before_.end(), node) == silent_before_.end()) {
        report(attempts_->stopped_answering(attempt, node, options_.heartbeat_timeout) +
               ": the other nodes' workers go on without its workers");
      }
    }
    silent_before_ = silent;
    if (silent.empty()) return;
    const auto text_at = [this](const std::string& key) { return text_of(live_store_->get(key)); };
    const bool formed = live_store_->check({elastic::generation_key(attempt)});
    const int generation = formed ? std::stoi(text_at(elastic::generation_key(attempt))) : 0;
    std::vector<elastic::Member> members;
    if (live_store_->check({elastic::members_key(attempt, generation)})) {
      members = elastic::parse_members(text_at(elastic::members_key(attempt, generation)));
    } else {  // the first generation, of every worker launched
      for (int id = 0; id < options_.nnodes * options_.nproc_per_node; ++id) members.push_back({id, 0});
    }
    for (const elastic::Member& member : members) {
      const int node = member.id / options_.nproc_per_node;
      if (std::find(silent.begin(), silent.end(), node) != silent.end()) mark_ended(attempt, member);
    }
  }

  // Until the workers end, or one fails, or the job fails elsewhere. Without the store (node 0
  // gone, or just done) the workers' own collectives tell whether the job can go on; this
  // launcher stops asking, and says so in `store_lost_`.
  int supervise(WorkerGroup& workers, int attempt) {
    try {
      workers.watch(std::make_unique<HeartbeatMonitor>(master_addr_of(options_), store_port_, attempt, ranks_,
                                                       options_.heartbeat_timeout));
    } catch (const std::exception& e) {
      report("cannot watch the workers' heartbeats (" + std::string(e.what()) +
             "); hung workers are left to "
             "their collectives' timeouts");
    }
    workers.stop_when([this, attempt]() -> std::optional<std::string> {
      if (store_lost_) return std::nullopt;
      try {
        if (auto failed = attempts_->failed_elsewhere(attempt)) return failed;
        if (options_.recovery == "live") {
          end_workers_of_silent_nodes(attempt);
          return std::nullopt;
        }
        return attempts_->silent_node(attempt, options_.heartbeat_timeout);
      } catch (const std::exception&) {
        store_lost_ = true;
        return std::nullopt;
      }
    });
    return workers.supervise(signals_);
  }

  // Tells the store the attempt failed (first, so that a launcher started again meanwhile
  // joins the next attempt); the failure, with the nodes lost with it. Nullopt: the store is gone.
  std::optional<std::string> record_failure(int attempt, std::string failure) {
    try {
      attempts_->fail(attempt, failure);
      if (options_.nnodes > 1) {
        // A worker whose peers vanished says only that a connection closed: name the node,
        // when its launcher is gone too.
        const std::string lost = attempts_->lost_nodes(attempt, kLostAfter);
        if (!lost.empty()) {
          failure += "; " + lost;
          report(lost);
        }
      }
      return failure;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  int store_gone(int status) const {
    report("lost the job's store on node 0 (" + master_addr_of(options_) + "): " +
           (options_.recovery == "live" ? "this node is cut off from it, or node 0 is gone; the other nodes go on "
                                          "without this node's workers while they reach it"
                                        : "the job ends with it"));
    return status;
  }

  const LaunchOptions& options_;
  SignalInbox signals_;  // before the store starts its threads, so they inherit the blocked signals
  int store_port_;
  std::unique_ptr<AgentStore> store_;
  std::optional<JobAttempts> attempts_;
  const std::vector<std::string> inherited_;
  const bool terminal_;  // workers write into pipes: only the launcher can tell their output reaches a person
  const std::vector<int> ranks_;
  CoreBinding binding_;
  std::unique_ptr<c10d::TCPStore> live_store_;  // live recovery's; left to the end of the process
  int restarts_used_ = 0;                       // live recovery's replacements so far
  bool store_lost_ = false;                     // node 0's store stopped answering
  std::vector<int> silent_before_;              // the nodes live recovery found silent at its last look
};

}  // namespace

int run_workers(const LaunchOptions& options) {
  validate(options);
  if (options.backend == "mpi") exec_mpirun(options);
  return Launcher(options).run();
}

}  // namespace lockstep::launch
