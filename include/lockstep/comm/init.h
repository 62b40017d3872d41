#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <torch/arg.h>

#include "lockstep/comm/types.h"

namespace lockstep {

/// Overrides for what init() discovers from the environment. Unset fields come from
/// LOCKSTEP_*, torchrun (RANK, WORLD_SIZE, ...), OpenMPI (OMPI_COMM_WORLD_*) or Slurm
/// (SLURM_PROCID, ...) variables, in that order of precedence.
struct InitOptions {
  /// The host backend (LOCKSTEP_BACKEND: auto, gloo or mpi; nccl is read as auto here and
  /// nccl for device_backend).
  TORCH_ARG(Backend, backend) = Backend::Auto;
  /// Who moves CUDA tensors (LOCKSTEP_DEVICE_BACKEND: auto, staged or nccl).
  TORCH_ARG(DeviceBackend, device_backend) = DeviceBackend::Auto;
  TORCH_ARG(InitMethod, method) = InitMethod::Auto;
  TORCH_ARG(std::optional<int>, rank);
  TORCH_ARG(std::optional<int>, world_size);
  TORCH_ARG(std::optional<int>, local_rank);
  TORCH_ARG(std::optional<int>, local_world_size);
  /// TCP store address; rank 0 hosts the store unless a launcher already does.
  TORCH_ARG(std::optional<std::string>, master_addr);
  TORCH_ARG(std::optional<int>, master_port);
  /// Directory on a file system every rank shares; use a fresh one per job.
  TORCH_ARG(std::optional<std::string>, file_path);
  /// Bounds rendezvous and every collective (LOCKSTEP_TIMEOUT seconds, default 300 s).
  TORCH_ARG(std::optional<std::chrono::milliseconds>, timeout);
  /// Checks before every collective that all ranks pass the same shapes and dtypes
  /// (LOCKSTEP_DEBUG=detail, or 1), as PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL does. Costs
  /// one small exchange over the host backend per collective. Without it, MPI still checks
  /// every call (a mismatched MPI call corrupts memory), and other transports name a
  /// mismatch when the call fails or times out.
  TORCH_ARG(std::optional<bool>, debug);
  /// Ranks on one host reduce through shared memory (LOCKSTEP_SHM=0 turns it off; default
  /// on). Across hosts, shared memory inside each and the backend between them.
  TORCH_ARG(std::optional<bool>, shared_memory);
  /// This rank's CUDA device, made the current one (a CUDA build). Default: the local rank's
  /// (local rank mod the visible GPUs) wherever a GPU is visible, so that `torch::kCUDA`
  /// means a GPU of this rank's own.
  TORCH_ARG(std::optional<int>, device);
};

/// Joins the process group. With no environment at all, makes a world of size 1.
void init(const InitOptions& options = InitOptions());

/// Leaves the process group after a barrier; init() may be called again afterwards.
void shutdown();

bool is_initialized();
/// Whether a launcher started this process as one rank of a job: `lockstep run`, mpirun,
/// torchrun or srun (LOCKSTEP_RANK, OMPI_COMM_WORLD_RANK, RANK, or SLURM_STEP_ID with
/// SLURM_PROCID is set). Needs no init().
bool launched();
int rank();
int world_size();
/// Rank among the workers on this machine, and how many there are.
int local_rank();
int local_world_size();
/// The host backend in use: Gloo, Mpi, or Threads on the replicas of run_replicas.
Backend backend();
/// The device backend chosen: Auto, Staged or Nccl (ProcessGroup::transport() says what a
/// group uses).
DeviceBackend device_backend();

}  // namespace lockstep
