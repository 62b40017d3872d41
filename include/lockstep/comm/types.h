#pragma once

#include <string>

namespace lockstep {

/// The engine that moves bytes. Auto: MPI when launched by mpirun, Gloo otherwise, and for
/// CUDA tensors NCCL when every rank of the group has a GPU of its own. Gloo and Mpi move
/// CUDA tensors through host memory. Nccl: NCCL for CUDA tensors, Auto's engine for CPU
/// ones (a build against a CUDA libtorch; docs/GPU.md). Threads: the replicas of
/// run_replicas(), which reduce through their process's memory.
enum class Backend { Auto, Gloo, Mpi, Nccl, Threads };

/// How ranks find each other. Auto: MPI under mpirun, else a TCP store when MASTER_ADDR
/// is set, else a file store when LOCKSTEP_INIT_FILE is set, else a world of size 1.
enum class InitMethod { Auto, Tcp, File, Mpi };

/// Element-wise reduction. Avg is Sum divided by the world size (truncating for integers).
enum class ReduceOp { Sum, Avg, Min, Max, Product };

std::string to_string(Backend backend);
std::string to_string(InitMethod method);
std::string to_string(ReduceOp op);

}  // namespace lockstep
