#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

/// The host backend: what moves host memory between hosts (CPU tensors, and
/// device tensors staged through the host); ranks on one host meet in shared memory
/// whatever it is. Auto: MPI when launched by mpirun, Gloo otherwise. Threads: the
/// replicas of run_replicas(), which reduce through their process's memory. Nccl is kept
/// for the settings that named it before the device backend existed: Auto's host backend,
/// and DeviceBackend::Nccl.
enum class Backend { Auto, Gloo, Mpi, Nccl, Threads };

/// The device backend: who moves CUDA tensors. Auto: NCCL for a group whose ranks each
/// have a GPU of their own (a build with NCCL), staged through the host backend otherwise.
/// Staged: always through pinned host memory and the host backend. Nccl: always NCCL, an
/// error where it cannot be used. docs/GPU.md.
enum class DeviceBackend { Auto, Staged, Nccl };

/// How ranks find each other. Auto: MPI under mpirun, else a TCP store when MASTER_ADDR
/// is set, else a file store when LOCKSTEP_INIT_FILE is set, else a world of size 1.
enum class InitMethod { Auto, Tcp, File, Mpi };

/// Element-wise reduction. Avg is Sum divided by the world size (truncating for integers).
enum class ReduceOp { Sum, Avg, Min, Max, Product };

/// Elements of a tensor reduced by reduce_to_owners, from the previous range's end (0 for
/// the first) up to `end`, and the rank that needs their sum: `owner`, or every rank
/// (kEveryRank).
struct OwnedRange {
  int64_t end;
  int owner;
};
constexpr int kEveryRank = -1;

std::string to_string(Backend backend);
std::string to_string(DeviceBackend backend);
std::string to_string(InitMethod method);
std::string to_string(ReduceOp op);

}  // namespace lockstep
