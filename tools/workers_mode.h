#pragma once

#include <string>

namespace lockstep::tools {

/// How `lockstep train` runs its workers on this machine.
struct WorkersMode {
  std::string mode;  // "threads" (replicas in one process) or "processes" (one per worker)
  std::string note;  // a line to tell the user about that choice, or ""
};

/// The mode for `workers` workers on `device` (--device: auto, cpu, cuda or cuda:N) where
/// `gpus` GPUs are visible. `given` is --mode as given, "" when left out. Without CUDA the
/// default is threads (processes with restarts). With CUDA it is processes, one per GPU with
/// NCCL between them: thread replicas stage every bucket through host memory, and replicas
/// sharing a GPU would deadlock (libtorch runs a process's CUDA backward on one thread per
/// device), so threads are refused where two would share one. Throws ConfigError.
WorkersMode choose_workers_mode(const std::string& given, const std::string& device, int workers, int gpus,
                                int max_restarts);

}  // namespace lockstep::tools
