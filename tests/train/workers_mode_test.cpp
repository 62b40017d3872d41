// How `lockstep train` runs its workers, decided from the visible GPUs: the CPU twin of the
// CUDA choices (tests/gpu runs them on a GPU).
#include <gtest/gtest.h>

#include "lockstep/error.h"
#include "workers_mode.h"

namespace lockstep::tools {
namespace {

std::string refusal(const std::string& given, const std::string& device, int workers, int gpus, int max_restarts) {
  try {
    choose_workers_mode(given, device, workers, gpus, max_restarts);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(WorkersMode, WithoutCudaTheDefaultIsThreadsOrProcessesWithRestarts) {
  EXPECT_EQ(choose_workers_mode("", "cpu", 2, 1, 0).mode, "threads");
  EXPECT_EQ(choose_workers_mode("", "auto", 2, 0, 0).mode, "threads");
  EXPECT_EQ(choose_workers_mode("", "auto", 2, 0, 3).mode, "processes");
  EXPECT_EQ(choose_workers_mode("processes", "cpu", 2, 0, 0).mode, "processes");
  EXPECT_EQ(choose_workers_mode("threads", "cpu", 4, 1, 0).note, "");
  // No GPU visible: --device cuda is refused by the device check, which says why.
  EXPECT_EQ(choose_workers_mode("threads", "cuda", 2, 0, 0).mode, "threads");
  EXPECT_EQ(choose_workers_mode("", "cuda:0", 2, 0, 0).mode, "threads");
}

// Processes, one per GPU, reach NCCL; threads would stage every bucket through the host.
TEST(WorkersMode, WithCudaTheDefaultIsProcesses) {
  for (const std::string device : {"auto", "cuda", "cuda:0"}) {
    EXPECT_EQ(choose_workers_mode("", device, 2, 2, 0).mode, "processes") << device;
    EXPECT_EQ(choose_workers_mode("", device, 2, 1, 0).mode, "processes") << device;  // sharing: staged, said once
    EXPECT_EQ(choose_workers_mode("", device, 2, 1, 0).note, "") << device;
  }
}

TEST(WorkersMode, ThreadsWithCudaNeedAGpuPerReplicaAndSayTheyStage) {
  const auto own = choose_workers_mode("threads", "cuda", 2, 2, 0);
  EXPECT_EQ(own.mode, "threads");
  EXPECT_EQ(own.note,
            "lockstep train: --mode threads stages every gradient bucket through host memory; without it, "
            "each worker is a process on a GPU of its own and NCCL moves the gradients");
  EXPECT_EQ(choose_workers_mode("threads", "auto", 1, 1, 0).mode, "threads");
  EXPECT_EQ(choose_workers_mode("threads", "cuda:1", 1, 2, 0).mode, "threads");
}

// libtorch runs a process's CUDA backward on one thread per device: two replicas on one GPU
// would wait for each other until the timeout. Refused before any work, saying what to use.
TEST(WorkersMode, ThreadReplicasSharingAGpuAreRefused) {
  const std::string why =
      ", and replicas of one process sharing a GPU wait for each other's backward until the timeout "
      "(libtorch runs a process's CUDA backward on one thread per device); leave out --mode threads: "
      "with CUDA the workers are processes, which may share a GPU";
  EXPECT_EQ(refusal("threads", "cuda", 2, 1, 0), "--mode threads puts 2 replicas on 1 GPU" + why);
  EXPECT_EQ(refusal("threads", "auto", 3, 2, 0), "--mode threads puts 3 replicas on 2 GPUs" + why);
  EXPECT_EQ(refusal("threads", "cuda:0", 2, 4, 0), "--mode threads puts 2 replicas on cuda:0" + why);
}

}  // namespace
}  // namespace lockstep::tools
