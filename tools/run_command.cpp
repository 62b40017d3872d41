#include "run_command.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "comm/world/environment.h"
#include "job/malloc_tuning.h"
#include "launch/cluster_node.h"
#include "launch/launcher.h"
#include "lockstep/error.h"
#include "lockstep/train/device.h"

namespace lockstep::tools {
namespace {

// --rdzv-endpoint HOST:PORT as --master-addr HOST --master-port PORT.
void take_endpoint(const std::string& endpoint, launch::LaunchOptions& options) {
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  try {
    size_t used = 0;
    if (colon != std::string::npos) port = std::stoi(endpoint.substr(colon + 1), &used);
    if (colon == std::string::npos || used != endpoint.size() - colon - 1) port = 0;
  } catch (const std::exception&) {
    port = 0;
  }
  if (colon == 0 || port < 1 || port > 65535) {
    throw ConfigError("--rdzv-endpoint wants HOST:PORT, got '" + endpoint + "'");
  }
  options.master_addr = endpoint.substr(0, colon);
  options.master_port = port;
}

}  // namespace

void add_run_command(CLI::App& app, Action& chosen) {
  CLI::App* run = app.add_subcommand("run", "Start PROGRAM as N workers per node (torchrun-style)");
  auto options = std::make_shared<launch::LaunchOptions>();
  auto stop_timeout_seconds = std::make_shared<double>(5.0);

  CLI::Option* nproc =
      run->add_option("-n,--nproc-per-node,--nproc_per_node", options->nproc_per_node,
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
  // torchrun's spellings are taken too (--nproc_per_node, --node_rank, ...), so that its
  // command lines work as they are.
  run->add_option("--nnodes", options->nnodes,
                  "Nodes in the job; MIN:MAX starts once MIN came, admits the others as they "
                  "come and trains on while MIN nodes' workers are left (--recovery live)")
      ->transform([options](std::string text) { return launch::take_min("--nnodes", text, options->min_nnodes); })
      ->capture_default_str();
  run->add_option("--node-rank,--node_rank", options->node_rank, "This node's index in [0, nnodes)")
      ->capture_default_str();
  CLI::Option* master_addr = run->add_option("--master-addr,--master_addr", options->master_addr,
                                             "Store address (default 127.0.0.1 on one node)");
  CLI::Option* master_port = run->add_option("--master-port,--master_port", options->master_port,
                                             "Store port (default: a free one, one node only)");
  auto endpoint = std::make_shared<std::string>();
  run->add_option("--rdzv-endpoint,--rdzv_endpoint", *endpoint,
                  "HOST:PORT of the store: --master-addr HOST --master-port PORT, as torchrun spells it")
      ->excludes(master_addr)
      ->excludes(master_port);
  auto job_id = std::make_shared<std::string>();
  run->add_option("--rdzv-id,--rdzv_id", *job_id,
                  "The job's id (LOCKSTEP_JOB_ID): a launcher or worker of another job that reaches this job's "
                  "store fails at once, naming both");
  run->add_option("--rdzv-backend,--rdzv_backend", "c10d: the only one, a TCPStore the launcher of node 0 hosts")
      ->check(CLI::IsMember({"c10d"}));
  CLI::Option* standalone =
      run->add_flag("--standalone", "One node, its store on a free local port (the default without --nnodes)");
  run->add_option("--stop-timeout", *stop_timeout_seconds, "Seconds stopped workers get before SIGKILL")
      ->capture_default_str();
  run->add_option("--max-restarts,--max_restarts", options->max_restarts,
                  "Times to restart every worker after one fails")
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
  CLI::Option* no_malloc_tuning = run->add_flag(
      "--no-malloc-tuning",
      "Leave the workers glibc's malloc defaults (or LOCKSTEP_MALLOC_TUNING=0). By default they keep freed memory "
      "for the next step instead of returning it to the system (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, "
      "MALLOC_TOP_PAD_; about 1.7x faster CPU steps in a process), unless they set a MALLOC_*_, GLIBC_TUNABLES or "
      "LD_PRELOAD of their own");
  run->add_option("PROGRAM", options->command, "The worker program and its ARGS, after --");

  run->callback([&chosen, options, nproc, recovery, stop_timeout_seconds, rdzv_seconds, heartbeat_seconds, endpoint,
                 job_id, standalone, no_malloc_tuning] {
    if (!endpoint->empty()) take_endpoint(*endpoint, *options);
    if (standalone->count() > 0 && options->nnodes > 1) {
      throw ConfigError("--standalone runs one node, but --nnodes is " + std::to_string(options->nnodes));
    }
    if (!job_id->empty()) setenv("LOCKSTEP_JOB_ID", job_id->c_str(), 1);  // the launcher's and its workers'
    auto milliseconds = [](double seconds) {
      return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    };
    options->stop_timeout = milliseconds(*stop_timeout_seconds);
    options->rdzv_timeout = milliseconds(*rdzv_seconds);
    options->heartbeat_timeout = milliseconds(*heartbeat_seconds);
    const bool nproc_given = nproc->count() > 0;
    const bool recovery_given = recovery->count() > 0;
    const bool malloc_tuning = no_malloc_tuning->count() == 0;
    chosen = [options, nproc_given, recovery_given, malloc_tuning] {
      if (malloc_tuning) tune_malloc_here();  // the workers inherit it
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
