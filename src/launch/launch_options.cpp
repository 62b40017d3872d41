#include "launch/launch_options.h"

#include <algorithm>

#include "lockstep/error.h"

namespace lockstep::launch {

std::string take_min(const std::string& flag, const std::string& text, int& min) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return text;
  const std::string given = text.substr(0, colon);
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(given, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != given.size() || value < 1) {
    throw ConfigError(flag + " " + text + ": MIN in MIN:MAX must be a count of at least 1");
  }
  min = value;
  return text.substr(colon + 1);
}

void validate(const LaunchOptions& options) {
  if (options.nproc_per_node < 1) {
    throw ConfigError("-n must be at least 1 (got " + std::to_string(options.nproc_per_node) + ")");
  }
  if (options.nnodes < 1) {
    throw ConfigError("--nnodes must be at least 1 (got " + std::to_string(options.nnodes) + ")");
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw ConfigError("--node-rank must be in [0, " + std::to_string(options.nnodes) + ") for --nnodes " +
                      std::to_string(options.nnodes) + " (got " + std::to_string(options.node_rank) + ")");
  }
  if (options.backend != "" && options.backend != "gloo" && options.backend != "mpi" && options.backend != "nccl") {
    throw ConfigError("--backend must be gloo or mpi, or nccl for --device-backend nccl (got '" + options.backend +
                      "')");
  }
  if (options.device_backend != "" && options.device_backend != "auto" && options.device_backend != "staged" &&
      options.device_backend != "nccl") {
    throw ConfigError("--device-backend must be auto, staged or nccl (got '" + options.device_backend + "')");
  }
  if (!options.bind.empty() && options.bind != "core" && options.bind != "none") {
    throw ConfigError("--bind must be core or none (got '" + options.bind + "')");
  }
  if (options.backend == "nccl" && !options.device_backend.empty() && options.device_backend != "nccl") {
    throw ConfigError("--backend nccl means --device-backend nccl, which conflicts with --device-backend " +
                      options.device_backend + "; leave out --backend nccl");
  }
  if (options.heartbeat_timeout <= std::chrono::milliseconds(0)) {
    throw ConfigError("--heartbeat-timeout must be positive");
  }
  if (options.max_restarts < 0) {
    throw ConfigError("--max-restarts must not be negative (got " + std::to_string(options.max_restarts) + ")");
  }
  if (options.min_nproc > options.nproc_per_node) {
    throw ConfigError("-n " + std::to_string(options.min_nproc) + ":" + std::to_string(options.nproc_per_node) +
                      ": MIN must not exceed MAX");
  }
  if (options.min_nnodes > options.nnodes) {
    throw ConfigError("--nnodes " + std::to_string(options.min_nnodes) + ":" + std::to_string(options.nnodes) +
                      ": MIN must not exceed MAX");
  }
  if (options.min_nnodes > 0 && options.recovery != "live") {
    throw ConfigError(
        "--nnodes MIN:MAX starts with the nodes that came and admits the others later, as --recovery live does; "
        "leave out --recovery " +
        options.recovery);
  }
  if (options.min_nproc > 0 && options.recovery != "live") {
    throw ConfigError(
        "-n MIN:MAX trains on with fewer workers than it started, as --recovery live does; leave out "
        "--recovery " +
        options.recovery);
  }
  if (options.recovery != "restart" && options.recovery != "live") {
    throw ConfigError("--recovery must be live or restart, got '" + options.recovery + "'");
  }
  if (options.recovery == "live" && options.backend == "mpi") {
    throw ConfigError("--recovery live needs the launcher's store, but --backend mpi hands the job to mpirun");
  }
  if (options.max_restarts > 0 && options.backend == "mpi") {
    throw ConfigError("--max-restarts cannot restart a job handed to mpirun; leave out --backend mpi");
  }
  if (options.backend == "mpi" && options.nnodes > 1) {
    throw ConfigError("--backend mpi runs on one node only; for several nodes use mpirun with a hostfile directly");
  }
  if (options.nnodes > 1 && (!options.master_addr || !options.master_port)) {
    throw ConfigError("--nnodes " + std::to_string(options.nnodes) +
                      " needs --master-addr and --master-port so every node finds the same store");
  }
  if (options.master_port && (*options.master_port < 1 || *options.master_port > 65535)) {
    throw ConfigError("--master-port must be in [1, 65535] (got " + std::to_string(*options.master_port) + ")");
  }
  if (options.stop_timeout.count() < 0) {
    throw ConfigError("--stop-timeout must not be negative");
  }
  if (options.command.empty() || options.command.front().empty()) {
    throw ConfigError("no PROGRAM to run; put it after '--': lockstep run -n N -- PROGRAM ARGS...");
  }
}

std::string binding_by_default(const std::string& asked, bool gpu_job) {
  if (!asked.empty()) return asked;
  return gpu_job ? "none" : "";
}

int loader_threads_by_default(bool gpu_job, int cores, int workers_on_this_node) {
  if (!gpu_job) return 1;
  return std::clamp(cores / std::max(1, workers_on_this_node), 1, 8);
}

std::string master_addr_of(const LaunchOptions& options) { return options.master_addr.value_or("127.0.0.1"); }

}  // namespace lockstep::launch
