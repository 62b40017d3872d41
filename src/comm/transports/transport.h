#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include "comm/calls/call.h"
#include "comm/transports/failure_reports.h"
#include "lockstep/comm/types.h"
#include "lockstep/error.h"

namespace lockstep {

/// What moves a group's tensors: gloo, MPI, shared memory, threads or a hierarchy of them for
/// host memory (HostTransport), NCCL for CUDA memory. A transport knows nothing of queues,
/// Avg, packing or error wording (the Communicator does those once); it runs one primitive
/// at a time, on contiguous tensors already checked, for a call whose `tag` is the same on
/// every rank that made the same call. `op` is Avg only where averages() said so.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo", "mpi", "shm", "shm+gloo", "nccl": what a user sees in ProcessGroup::transport().
  virtual std::string name() const = 0;

  virtual void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) = 0;
  virtual void broadcast(at::Tensor& tensor, int root, uint32_t tag) = 0;
  /// Leaves non-root tensors unchanged.
  virtual void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) = 0;
  /// `output` is [size, *input.shape].
  virtual void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) = 0;
  /// `output` is this rank's slice of the reduced input along dimension 0. The default
  /// all-reduces a copy of the input and keeps the slice.
  virtual void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag);
  /// Reduces `tensor` where each of `ranges` has its owner (reduce_to_owners): the sums of
  /// this rank's ranges and of kEveryRank's must be all_reduce's, bit for bit. The default
  /// all-reduces: an engine's own reduce-scatter orders the sums of three or more ranks
  /// otherwise than its all-reduce, and ZeRO-2 must step what DDP would. Between two ranks,
  /// where a sum or product is the same whichever rank computes it, a transport that
  /// exchanges_with_peer() sends the other rank only the elements it needs.
  virtual void reduce_to_owners(at::Tensor& tensor, const std::vector<OwnedRange>& ranges, ReduceOp op, uint32_t tag);

  /// Whether an element's reduction is the same wherever it lies in a tensor and however long
  /// the tensor is: where every rank combines the ranks' values in rank order (shared memory,
  /// threads) and between two ranks (a + b is b + a). An engine's ring over three or more
  /// ranks starts each chunk's sum at another rank, so where an element lies decides its order.
  virtual bool sums_independent_of_layout() const { return size() <= 2; }

  /// Runs `primitives`, the several primitives of one call (a coalesced call's, one per
  /// dtype), as one launch where the transport can: NCCL makes them one group, whose
  /// primitives are queued only once the group ends, so nothing may read their results
  /// before this returns. The default runs them in turn.
  virtual void together(const std::function<void()>& primitives) { primitives(); }
  /// Whether the transport takes Avg of `dtype` itself (NCCL's ncclAvg); otherwise the
  /// Communicator sends a Sum in averaging_dtype and divides.
  virtual bool averages(at::ScalarType) const { return false; }

 protected:
  /// Whether exchange_with_peer() works (in a group of two).
  virtual bool exchanges_with_peer() const { return false; }
  /// In a group of two: sends `send_bytes` to the other rank and receives `receive_bytes`
  /// from it, which it sends in the same call.
  virtual void exchange_with_peer(const void* send, size_t send_bytes, void* receive, size_t receive_bytes,
                                  uint32_t tag);
};

/// A transport of host memory, which every group has: it also carries the group's barriers,
/// its small exchanges (mismatch checks, connecting device transports) and shared tensors.
class HostTransport : public Transport {
 public:
  virtual void barrier(uint32_t tag) = 0;
  virtual void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) = 0;

  /// A CPU tensor that later collectives may move without staging copies (shared memory
  /// maps every local rank's tensor into all of them). Every rank calls it, in order, with
  /// the same sizes and dtype. The default is an ordinary tensor.
  virtual at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, uint32_t tag);

  /// Transports whose mismatched calls could corrupt memory (MPI) compare fingerprints
  /// before every such collective; others rely on tags and compare only in debug mode.
  virtual bool checks_every_call(const Call&) const { return false; }
  virtual bool same_fingerprint_everywhere(uint64_t fingerprint);

  /// False when a call cannot be interrupted (MPI): the Communicator then watches calls and
  /// ends the process when one outlives the timeout, rather than hang forever.
  virtual bool can_give_up() const { return true; }

  /// Makes the call running now, from another thread, and every later call fail with `why`:
  /// live recovery's way out of a collective that waits on a member known to be gone (a
  /// host cut off, whose connections never close). The default does nothing.
  virtual void abort(const std::string& /*why*/) {}

  /// A richer error than "rank R: call failed: what()" for a failed call of this transport,
  /// where the ranks can still learn what the others did (report_failures_through: gloo's
  /// store); null for the default wording.
  std::exception_ptr explain_failure(const Call& call, const std::exception& failure,
                                     std::chrono::steady_clock::duration elapsed, std::chrono::milliseconds timeout);
  /// The same for device work that never finished (the watchdog, while a collective may
  /// run): through this transport's reports, or else the world's store
  /// (report_device_failures_through: shared memory, whose own failures already name the
  /// rank that died or stalled).
  std::exception_ptr explain_device_failure(const Call& call, const std::exception& failure,
                                            std::chrono::steady_clock::duration elapsed,
                                            std::chrono::milliseconds timeout);
  void report_failures_through(std::shared_ptr<const FailureReports> reports) { reports_ = std::move(reports); }
  void report_device_failures_through(std::shared_ptr<const FailureReports> reports) {
    device_reports_ = std::move(reports);
  }

 private:
  std::shared_ptr<const FailureReports> reports_;
  std::shared_ptr<const FailureReports> device_reports_;
};

/// A transport of one device type's memory (NCCL for CUDA), beside a group's host transport.
class DeviceTransport : public Transport {
 public:
  /// The stream its collectives on `device` run on, connecting what that needs on first
  /// use. Called in the call's turn by every rank that made it. Nullopt: this group's
  /// tensors on `device` are staged through host memory instead (ranks share a GPU).
  virtual std::optional<c10::Stream> device_stream(at::Device device) = 0;
  /// Whether `device` is connected already (its first call made): a first call's setup
  /// cannot be captured in a CUDA graph.
  virtual bool connected(at::Device device) = 0;
  /// An error the device found on its own, after the call that queued the failing work
  /// returned (NCCL's asynchronous errors); "" while there is none.
  virtual std::string device_error() = 0;
  /// Stops the device's work, however stuck, before the process ends over it.
  virtual void abort() = 0;
  /// Every rank reached the group's last barrier: destruction may flush queued work within
  /// the timeout. Without this call (a failure, an exit without shutdown()) it aborts.
  virtual void leave_gracefully() = 0;
};

/// A group's device transports, by device type; each uses the group's host transport, which
/// outlives it.
using DeviceTransports = std::map<at::DeviceType, std::unique_ptr<DeviceTransport>>;

/// What one group moves its tensors with.
struct GroupTransports {
  std::unique_ptr<HostTransport> host;  // null on a rank that is not a member
  DeviceTransports devices;
};

/// Thrown by a transport that saw, before moving any data, that ranks made calls with
/// different tags: the Communicator then tells the user how the calls differ, and the
/// group stays usable.
class CallsDiffer : public std::exception {
 public:
  const char* what() const noexcept override { return "ranks called different collectives"; }
};

/// Thrown in a call's turn, before any data moved, by a rank that cannot make the call as it
/// was made (a staged call on a stream that captures a CUDA graph): the caller gets the
/// reason, and the group stays usable.
class CallRefused : public Error {
 public:
  using Error::Error;
};

}  // namespace lockstep
