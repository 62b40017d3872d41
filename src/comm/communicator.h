#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/call.h"
#include "lockstep/comm/types.h"
#include "lockstep/comm/work.h"

namespace lockstep {

/// A process group: the collectives every backend offers, with what they share done once
/// here (argument checks, Avg, packing many tensors into one, ordering of async work,
/// mismatch checks, errors that name the call), and the moving of bytes left to backends.
///
/// Collectives run one at a time in the order they were called: a blocking call runs on
/// the caller's thread when nothing is queued, async calls on one background thread.
class Communicator {
 public:
  Communicator(int rank, int world_size, std::chrono::milliseconds timeout, bool debug);
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  virtual Backend backend() const = 0;

  Work all_reduce(std::vector<at::Tensor> tensors, ReduceOp op, bool blocking);
  Work broadcast(std::vector<at::Tensor> tensors, int root, bool blocking);
  Work reduce(at::Tensor tensor, int root, ReduceOp op, bool blocking);
  Work all_gather(at::Tensor tensor, bool blocking);
  Work reduce_scatter(at::Tensor input, ReduceOp op, bool blocking);
  Work barrier(bool blocking);

  /// True once a collective failed in a way that leaves the group unusable.
  bool has_failed() const;

  /// Description of the collective running now and for how long, if one is (for watchdogs).
  std::optional<std::pair<std::string, std::chrono::steady_clock::duration>> running() const;

 protected:
  // Backend primitives. They run one at a time, on tensors already checked, for a call
  // whose tag is the same on every rank that made the same call. `op` is never Avg.
  virtual void run_all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) = 0;
  virtual void run_broadcast(at::Tensor& tensor, int root, uint32_t tag) = 0;
  /// Leaves non-root tensors unchanged.
  virtual void run_reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) = 0;
  /// `output` is [world_size, *input.shape].
  virtual void run_all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) = 0;
  /// Default: all_reduce a copy of `input`, keep this rank's slice.
  virtual void run_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op,
                                  uint32_t tag);
  virtual void run_barrier(uint32_t tag) = 0;
  virtual void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) = 0;

  /// Backends whose mismatched calls could corrupt memory (MPI) compare fingerprints
  /// before every collective; others rely on tags and compare only in debug mode.
  virtual bool checks_every_call() const { return false; }
  virtual bool same_fingerprint_everywhere(uint64_t fingerprint);

  /// Turns a backend failure into the error the user sees. The default names the call;
  /// backends that can still reach the other ranks (through a store) say what they did.
  virtual std::exception_ptr explain_failure(const Call& call, const std::exception& failure,
                                             std::chrono::steady_clock::duration elapsed);

  /// Derived destructors call this first: the background thread calls their methods.
  void stop_worker();

 private:
  using Body = std::function<std::vector<at::Tensor>(const Call&)>;
  struct Task {
    Call call;
    Body body;
    std::shared_ptr<detail::WorkState> state;
  };

  Work submit(Call call, Body body, bool blocking);
  void execute(Task& task);
  void run_queued_through(detail::WorkState& state);
  /// Runs `tasks` on this thread as the one collective runner; `lock` holds mutex_.
  void run_in_turn(std::unique_lock<std::mutex>& lock, std::deque<Task>& tasks);
  void mark_failed(const std::string& what);
  void check_same_call(const Call& call);
  void worker_loop();
  void divide_by_world_size(at::Tensor& tensor) const;
  /// Runs `run` on each tensor, or, for several, on one packed buffer per dtype (tags
  /// counting up from `tag`), copying the results back.
  void for_each_packed(std::vector<at::Tensor>& tensors, uint32_t tag,
                       const std::function<void(at::Tensor&, uint32_t)>& run);

  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const bool debug_;

  mutable std::mutex mutex_;  // guards everything below it
  std::condition_variable changed_;
  std::deque<Task> queue_;
  bool busy_ = false;  // a collective is running, inline or on the worker
  bool stopping_ = false;
  uint64_t next_seq_ = 0;
  std::string failure_;  // set once a collective failed: the group is unusable after
  std::thread worker_;

  mutable std::mutex running_mutex_;
  const Call* running_call_ = nullptr;
  std::chrono::steady_clock::time_point running_since_;
};

}  // namespace lockstep
