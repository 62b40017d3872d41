#pragma once

#include <map>
#include <string>

#include <mpi.h>

#include "comm/transports/transport.h"

namespace lockstep {

/// Collectives over an MPI communicator (as launched by mpirun). MPI calls cannot be
/// interrupted, so mismatched calls are caught before they start (a fingerprint check on
/// every call), and the Communicator's watchdog ends the job when one outlives the timeout.
class MpiTransport : public HostTransport {
 public:
  /// Takes ownership of `comm`.
  explicit MpiTransport(MPI_Comm comm);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override;
  void broadcast(at::Tensor& tensor, int root, uint32_t tag) override;
  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override;
  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override;
  void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) override;
  void barrier(uint32_t tag) override;
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override;
  bool checks_every_call(const Call&) const override { return true; }
  bool same_fingerprint_everywhere(uint64_t fingerprint) override;
  bool can_give_up() const override { return false; }

 protected:
  bool exchanges_with_peer() const override { return true; }
  void exchange_with_peer(const void* send, size_t send_bytes, void* receive, size_t receive_bytes,
                          uint32_t tag) override;

 private:
  MPI_Op op_for(at::ScalarType dtype, ReduceOp op) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::map<std::pair<at::ScalarType, ReduceOp>, MPI_Op> custom_ops_;  // for float16, bfloat16
};

/// Starts MPI once per process, with threads allowed to call it at once (each process
/// group runs its collectives on its own thread).
void start_mpi();

/// Throws the error MPI reports for a failed call.
void check_mpi(int code, const char* what);

}  // namespace lockstep
