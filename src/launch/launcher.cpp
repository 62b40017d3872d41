#include "launch/launcher.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>

#include "launch/agent_store.h"
#include "launch/heartbeat_monitor.h"
#include "comm/world/cpu_topology.h"
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

}  // namespace

int run_workers(const LaunchOptions& options) {
  validate(options);
  if (options.backend == "mpi") {
    exec_mpirun(options);
  }

  SignalInbox signals;  // before the store starts its threads, so they inherit the blocked signals
  std::unique_ptr<AgentStore> store;
  int store_port = options.master_port.value_or(0);
  if (options.node_rank == 0) {
    store = std::make_unique<AgentStore>(master_addr_of(options), store_port);
    store_port = store->port();
  }

  JobAttempts attempts(options, store_port);
  const std::vector<std::string> inherited = current_environment();
  // Workers write into pipes, so only the launcher can tell them their output reaches a person.
  const bool terminal = isatty(STDOUT_FILENO) != 0;
  std::vector<int> ranks;  // this node's
  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    ranks.push_back(options.node_rank * options.nproc_per_node + local_rank);
  }
  // A launcher started again after its node was lost joins the attempt in progress.
  CoreBinding binding;
  if (options.bind != "none") {
    binding = bind_to_cores(options.nproc_per_node, allowed_cpus());
    // Only asked-for binding that cannot be had is worth a line; by default it binds when it fits.
    if (!binding.unbound_why.empty() && options.bind == "core") report(binding.unbound_why);
  }
  std::string last_failure;  // of the attempt before, for the workers of the next
  for (int attempt = attempts.current();; ++attempt) {
    attempts.join(attempt);
    WorkerGroup workers(options.stop_timeout, terminal);
    for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
      WorkerRanks place{ranks[local_rank], local_rank};
      try {
        workers.add(place.rank,
                    spawn_worker(options.command,
                                 worker_environment(inherited, options, place, store_port, attempt, terminal, last_failure),
                                 binding.cpus.empty() ? -1 : binding.cpus[local_rank]));
      } catch (const Error& error) {
        workers.abandon(kCannotRunStatus, "rank " + std::to_string(place.rank) + ": " + error.what());
        break;
      }
    }
    try {
      workers.watch(std::make_unique<HeartbeatMonitor>(master_addr_of(options), store_port, attempt, ranks,
                                                       options.heartbeat_timeout));
    } catch (const std::exception& e) {
      report("cannot watch the workers' heartbeats (" + std::string(e.what()) + "); hung workers are left to "
             "their collectives' timeouts");
    }
    // Without the store (node 0 gone, or just done) the workers' own collectives tell whether
    // the job can go on; this launcher stops asking.
    bool store_lost = false;
    workers.stop_when([&]() -> std::optional<std::string> {
      if (store_lost) return std::nullopt;
      try {
        if (auto failed = attempts.failed_elsewhere(attempt)) return failed;
        return attempts.silent_node(attempt, options.heartbeat_timeout);
      } catch (const std::exception&) {
        store_lost = true;
        return std::nullopt;
      }
    });
    const int status = workers.supervise(signals);
    if (status != 0 && store_lost) {
      report("lost the job's store on node 0 (" + master_addr_of(options) + "): the job ends with it");
      return status;
    }
    // Only a failure is worth a restart: not success, a stop the launcher was asked for, or a
    // program that cannot run at all.
    if (status == 0 || !workers.failure() || status == kCannotRunStatus) return status;
    std::string failure = *workers.failure();
    try {
      // First, so that a launcher started again meanwhile joins the next attempt.
      attempts.fail(attempt, failure);
      if (options.nnodes > 1) {
        // A worker whose peers vanished says only that a connection closed: name the node,
        // when its launcher is gone too.
        const std::string lost = attempts.lost_nodes(attempt, kLostAfter);
        if (!lost.empty()) {
          failure += "; " + lost;
          report(lost);
        }
      }
    } catch (const std::exception&) {
      report("lost the job's store on node 0 (" + master_addr_of(options) + "): the job ends with it");
      return status;
    }
    if (attempt == options.max_restarts) {
      if (options.max_restarts > 0) {
        report("the job failed " + std::to_string(attempt + 1) + " times, which --max-restarts " +
               std::to_string(options.max_restarts) + " allows no more; the last failure: " + failure);
      }
      return status;
    }
    report("restart " + std::to_string(attempt + 1) + " of " + std::to_string(options.max_restarts) +
           ": starting every worker afresh after " + failure);
    last_failure = failure;
  }
}

}  // namespace lockstep::launch
