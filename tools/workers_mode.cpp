#include "workers_mode.h"

#include "lockstep/error.h"

namespace lockstep::tools {

WorkersMode choose_workers_mode(const std::string& given, const std::string& device, int workers, int gpus,
                                int max_restarts) {
  const bool one_gpu = device.rfind("cuda:", 0) == 0;
  // No GPU visible: there is nothing to choose, and the device check says why CUDA cannot be used.
  const bool cuda = gpus > 0 && (one_gpu || device == "cuda" || device == "auto");
  if (!given.empty() && !(cuda && given == "threads")) return {given, ""};
  if (!cuda) return {max_restarts > 0 ? "processes" : "threads", ""};
  if (given.empty()) return {"processes", ""};
  const int replicas_per_gpu = one_gpu ? workers : (workers + gpus - 1) / gpus;
  if (replicas_per_gpu > 1) {
    const std::string where = one_gpu ? device : std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
    throw ConfigError("--mode threads puts " + std::to_string(workers) + " replicas on " + where +
                      ", and replicas of one process sharing a GPU wait for each other's backward until the timeout "
                      "(libtorch runs a process's CUDA backward on one thread per device); leave out --mode threads: "
                      "with CUDA the workers are processes, which may share a GPU");
  }
  return {"threads",
          "lockstep train: --mode threads stages every gradient bucket through host memory; without it, "
          "each worker is a process on a GPU of its own and NCCL moves the gradients"};
}

}  // namespace lockstep::tools
