#include "launch/launcher.h"

#include <iostream>
#include <memory>
#include <optional>

#include "launch/agent_store.h"
#include "launch/heartbeat_monitor.h"
#include "launch/mpirun_command.h"
#include "launch/node_registration.h"
#include "launch/signal_inbox.h"
#include "launch/worker_environment.h"
#include "launch/worker_group.h"
#include "launch/worker_process.h"
#include "lockstep/comm/error.h"

namespace lockstep::launch {
namespace {

// Shell convention for a command that could not be executed.
constexpr int kCannotRunStatus = 127;

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

  register_node(options, store_port);
  const std::vector<std::string> inherited = current_environment();
  for (int restarts = 0;; ++restarts) {
    WorkerGroup workers(options.stop_timeout);
    for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
      WorkerPlace place{options.node_rank * options.nproc_per_node + local_rank, local_rank};
      try {
        workers.add(place.rank, spawn_worker(options.command,
                                             worker_environment(inherited, options, place, store_port, restarts)));
      } catch (const Error& error) {
        workers.abandon(kCannotRunStatus, "rank " + std::to_string(place.rank) + ": " + error.what());
        break;
      }
    }
    std::vector<int> ranks;
    for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
      ranks.push_back(options.node_rank * options.nproc_per_node + local_rank);
    }
    try {
      workers.watch(std::make_unique<HeartbeatMonitor>(master_addr_of(options), store_port, restarts, ranks,
                                                       options.heartbeat_timeout));
    } catch (const std::exception& e) {
      report("cannot watch the workers' heartbeats (" + std::string(e.what()) + "); hung workers are left to "
             "their collectives' timeouts");
    }
    const int status = workers.supervise(signals);
    // Only a worker's failure is worth a restart: not success, a stop the launcher was
    // asked for, or a program that cannot run at all.
    if (status == 0 || !workers.failure() || status == kCannotRunStatus) return status;
    if (restarts == options.max_restarts) {
      if (options.max_restarts > 0) {
        report("the job failed " + std::to_string(restarts + 1) + " times, which --max-restarts " +
               std::to_string(options.max_restarts) + " allows no more; the last failure: " + *workers.failure());
      }
      return status;
    }
    report("restart " + std::to_string(restarts + 1) + " of " + std::to_string(options.max_restarts) +
           ": starting every worker afresh after " + *workers.failure());
  }
}

}  // namespace lockstep::launch
