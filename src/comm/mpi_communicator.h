#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <mpi.h>

#include "comm/communicator.h"

namespace lockstep {

/// Collectives over MPI (as launched by mpirun). MPI calls cannot be interrupted, so
/// mismatched calls are caught before they start (a fingerprint check on every call) and a
/// watchdog ends the job, naming the stalled collective, when one outlives the timeout.
class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm world, std::chrono::milliseconds timeout, bool debug);
  ~MpiCommunicator() override;

  Backend backend() const override { return Backend::Mpi; }

 protected:
  void run_all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override;
  void run_broadcast(at::Tensor& tensor, int root, uint32_t tag) override;
  void run_reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override;
  void run_all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override;
  void run_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op,
                          uint32_t tag) override;
  void run_barrier(uint32_t tag) override;
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override;
  bool checks_every_call() const override { return true; }
  bool same_fingerprint_everywhere(uint64_t fingerprint) override;

 private:
  MPI_Op op_for(at::ScalarType dtype, ReduceOp op) const;
  void watch();

  MPI_Comm comm_;
  std::map<std::pair<at::ScalarType, ReduceOp>, MPI_Op> custom_ops_;  // for float16, bfloat16

  std::mutex watch_mutex_;
  std::condition_variable watch_stop_;
  bool stop_watching_ = false;
  std::thread watchdog_;
};

}  // namespace lockstep
