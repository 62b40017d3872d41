#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "lockstep/comm/init.h"

namespace lockstep {

/// Everything init() needs to know, settled from InitOptions and the environment.
struct WorldSpec {
  /// The host backend, settled: Gloo, Mpi or Threads.
  Backend backend = Backend::Gloo;
  /// Who moves CUDA tensors (DeviceBackend), decided for each group as it connects.
  DeviceBackend device_backend = DeviceBackend::Auto;
  /// Auto here means "nothing to meet": a world of size 1.
  InitMethod method = InitMethod::Auto;
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;  // unset: found from host names at rendezvous
  std::optional<int> local_world_size;
  std::string master_addr;
  int master_port = 29500;
  bool store_hosted_by_launcher = false;  // rank 0 must not host the TCP store itself
  std::string file_path;
  std::string socket_ifname;  // network interface for gloo's connections, if pinned
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  bool debug = false;  // compare every call's fingerprint (LOCKSTEP_DEBUG=detail)
  bool launched_by_mpirun = false;
  /// Local ranks meet in shared memory (LOCKSTEP_SHM, default on).
  bool shared_memory = true;
  /// The launcher's node (torchrun's and lockstep run's GROUP_RANK): ranks of different
  /// launchers never share memory, even on one machine.
  std::optional<int> node_rank;
  /// How many times the launcher has restarted the job (LOCKSTEP_RESTART_COUNT): each
  /// attempt meets under its own store keys, whatever the last one left there.
  int restart_count = 0;
  /// Why the launcher restarted it, as it said (LOCKSTEP_RESTART_REASON); "" at first.
  std::string restart_reason;
  /// The job this rank belongs to (job/job_identity.h): its store refuses other jobs.
  std::string job_id;
  /// `lockstep run` watches this rank's heartbeats in its store (LOCKSTEP_HEARTBEAT=1).
  bool heartbeat = false;
  /// The launcher's name for this worker, which live recovery keeps while ranks change
  /// (the first rank it was given), and how many times its launcher started it
  /// (LOCKSTEP_INCARNATION: 0, or a replacement's count).
  int member_id = 0;
  int incarnation = 0;
  /// Live recovery's membership generation (elastic/membership.h): each meets under store
  /// keys of its own. 0: the workers as launched.
  int generation = 0;
};

/// Looks up an environment variable; tests pass a map instead of the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

EnvLookup process_environment();

/// Settles the world from explicit options first, then LOCKSTEP_*, torchrun, OpenMPI and
/// Slurm variables. Throws ConfigError naming the variable to fix.
WorldSpec discover_world(const InitOptions& options, const EnvLookup& env);

}  // namespace lockstep
