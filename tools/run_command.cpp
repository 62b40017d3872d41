#include "run_command.h"

#include <chrono>
#include <iostream>
#include <memory>

#include "comm/world/environment.h"
#include "launch/cluster_node.h"
#include "launch/launcher.h"
#include "lockstep/error.h"
#include "lockstep/train/device.h"

namespace lockstep::tools {

void add_run_command(CLI::App& app, Action& chosen) {
  CLI::App* run = app.add_subcommand("run", "Start PROGRAM as N workers per node (torchrun-style)");
  auto options = std::make_shared<launch::LaunchOptions>();
  auto stop_timeout_seconds = std::make_shared<double>(5.0);

  CLI::Option* nproc =
      run->add_option("-n,--nproc-per-node", options->nproc_per_node,
                      "Workers on this node (in a PyTorchJob pod: PET_NPROC_PER_NODE); MIN:MAX starts MAX and "
                      "trains on while MIN are left (--recovery live)")
          ->transform([options](std::string text) { return launch::take_min("-n", text, options->min_nproc); });
  run->add_option("--backend", options->backend,
                  "The host backend: gloo or mpi (mpi hands the job to mpirun); nccl means --device-backend nccl");
  run->add_option("--device-backend", options->device_backend,
                  "Who moves CUDA tensors: auto (NCCL where each rank has a GPU of its own), staged (through host "
                  "memory) or nccl");
  run->add_option("--bind", options->bind,
                  "core: each worker on a physical core of its own within this launcher's CPUs (one line when "
                  "there are too few); none: workers keep the launcher's CPUs (default: none where a GPU is "
                  "visible, else core when there are enough cores)")
      ->check(CLI::IsMember({"core", "none"}));
  run->add_option("--nnodes", options->nnodes,
                  "Nodes in the job; MIN:MAX starts once MIN came, admits the others as they "
                  "come and trains on while MIN nodes' workers are left (--recovery live)")
      ->transform([options](std::string text) { return launch::take_min("--nnodes", text, options->min_nnodes); })
      ->capture_default_str();
  run->add_option("--node-rank", options->node_rank, "This node's index in [0, nnodes)")->capture_default_str();
  run->add_option("--master-addr", options->master_addr, "Store address (default 127.0.0.1 on one node)");
  run->add_option("--master-port", options->master_port, "Store port (default: a free one, one node only)");
  run->add_option("--stop-timeout", *stop_timeout_seconds, "Seconds stopped workers get before SIGKILL")
      ->capture_default_str();
  run->add_option("--max-restarts", options->max_restarts, "Times to restart every worker after one fails")
      ->capture_default_str();
  CLI::Option* recovery =
      run->add_option("--recovery", options->recovery,
                      "restart: a failed worker stops every worker, and all start again (--max-restarts times); live: "
                      "the others go on without it, and it is started again (--max-restarts times) to rejoin them")
          ->check(CLI::IsMember({"live", "restart"}))
          ->capture_default_str();
  auto rdzv_seconds = std::make_shared<double>(300.0);
  run->add_option("--rdzv-timeout", *rdzv_seconds, "Seconds launchers wait for the other nodes")->capture_default_str();
  auto heartbeat_seconds = std::make_shared<double>(30.0);
  run->add_option("--heartbeat-timeout", *heartbeat_seconds, "Seconds without heartbeats after which a worker is hung")
      ->capture_default_str();
  run->add_option("PROGRAM", options->command, "The worker program and its ARGS, after --");

  run->callback([&chosen, options, nproc, recovery, stop_timeout_seconds, rdzv_seconds, heartbeat_seconds] {
    auto milliseconds = [](double seconds) {
      return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    };
    options->stop_timeout = milliseconds(*stop_timeout_seconds);
    options->rdzv_timeout = milliseconds(*rdzv_seconds);
    options->heartbeat_timeout = milliseconds(*heartbeat_seconds);
    const bool nproc_given = nproc->count() > 0;
    const bool recovery_given = recovery->count() > 0;
    chosen = [options, nproc_given, recovery_given] {
      const auto env = process_environment();
      const std::string note = launch::take_node_from_cluster(*options, nproc_given, env);
      if (!note.empty()) std::cerr << "lockstep run: " << note << "\n";
      // A range of workers or nodes trains on with fewer than it started: live recovery,
      // unless refused.
      if ((options->min_nproc > 0 || options->min_nnodes > 0) && !recovery_given) options->recovery = "live";
      if (!nproc_given && !env("PET_NPROC_PER_NODE")) {
        throw ConfigError("-n is required: the workers to start on this node");
      }
      // Workers on a machine with a GPU are taken to use it.
      options->bind = launch::binding_by_default(options->bind, train::visible_gpus() > 0);
      return launch::run_workers(*options);
    };
  });
}

}  // namespace lockstep::tools
