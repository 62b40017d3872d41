#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::launch {

/// What `lockstep run` starts: `nproc_per_node` copies of `command` on each of `nnodes`
/// machines. Defaults describe a single machine whose launcher picks a free store port.
struct LaunchOptions {
  /// Workers on this machine (-n); the world has nproc_per_node * nnodes ranks.
  int nproc_per_node = 1;
  int nnodes = 1;
  /// This machine's place among the nodes; its workers get ranks node_rank * nproc_per_node + i.
  int node_rank = 0;
  /// Where every worker finds the store; defaults to 127.0.0.1 on a single node.
  std::optional<std::string> master_addr;
  /// Store port; unset (single node only) lets the store pick a free one.
  std::optional<int> master_port;
  /// "gloo" or "mpi"; empty leaves the choice to the workers. "mpi" hands the job to mpirun.
  std::string backend;         // the host backend: "", gloo, mpi (nccl: device_backend nccl)
  std::string device_backend;  // who moves CUDA tensors: "", auto, staged, nccl
  /// How long stopped workers get between SIGTERM (or a forwarded signal) and SIGKILL.
  std::chrono::milliseconds stop_timeout = std::chrono::seconds(5);
  /// Times the workers are all started afresh after one fails (one budget for the job); in
  /// live recovery, times a failed worker is started again to rejoin the others.
  int max_restarts = 0;
  /// "restart": a failed worker stops every worker, and all start again (from the newest
  /// checkpoint, for lockstep train); "live": the others go on without it, and it is
  /// started again to rejoin them (LOCKSTEP_RECOVERY=live; elastic/membership.h).
  std::string recovery = "restart";
  /// `-n MIN:MAX`'s MIN: live recovery trains on while at least this many workers are left
  /// (LOCKSTEP_MIN_WORKERS), and below it they save a checkpoint and exit 75; 0: one.
  int min_nproc = 0;
  /// `--nnodes MIN:MAX`'s MIN (PET_NNODES=MIN:MAX): the job starts once MIN nodes came, with
  /// the nodes there, and the others join it when they come (nnodes is MAX); below MIN
  /// nodes' workers it ends as below -n's MIN. 0: every node starts the job.
  int min_nnodes = 0;
  /// How long launchers wait for the other nodes to start.
  std::chrono::milliseconds rdzv_timeout = std::chrono::seconds(300);
  /// A worker whose heartbeats (sent by lockstep's init()) stop for this long is hung.
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(30);
  /// "core": each worker pinned to a physical core of its own, within the launcher's
  /// affinity, when there are enough (else not, with one line saying so); "none": workers
  /// keep the launcher's affinity; "" (the default): "core" when there are enough cores,
  /// else "none", silently (binding_by_default() makes it "none" for GPU jobs).
  std::string bind;
  /// PROGRAM ARGS...; PROGRAM is looked up in PATH.
  std::vector<std::string> command;
};

/// The text of `flag` (-n, --nnodes) without a MIN: "2:3" gives "3" and sets `min` to 2;
/// "3" is returned as it is. ConfigError naming the text when MIN is not a count.
std::string take_min(const std::string& flag, const std::string& text, int& min);

/// Throws lockstep::ConfigError naming the option to fix when `options` cannot be launched.
void validate(const LaunchOptions& options);

/// The --bind a job gets when it asked for none (`asked` empty). GPU workers are not pinned:
/// a worker's training, autograd, loader, CUDA driver and NCCL proxy threads would share one
/// core, which CUDA's spin-waits take (torchrun binds nothing either); CPU workers keep the
/// default, a core each where there are enough, which training on the CPU measured to help.
std::string binding_by_default(const std::string& asked, bool gpu_job);

/// Loader threads per worker when a job asked for no number: on GPUs, this node's cores
/// shared among its workers, 1 to 8 each (PyTorch's recipes give a GPU 4 to 8 loader
/// workers; one thread cannot decode and augment fast enough to keep a GPU busy); on the
/// CPU 1, since training's own threads use the cores.
int loader_threads_by_default(bool gpu_job, int cores, int workers_on_this_node);

/// MASTER_ADDR the workers get: --master-addr, or 127.0.0.1 on a single node.
std::string master_addr_of(const LaunchOptions& options);

}  // namespace lockstep::launch
