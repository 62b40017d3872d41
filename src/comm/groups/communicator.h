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

#include "comm/groups/call_observer.h"
#include "comm/calls/call.h"
#include "comm/transports/device_call.h"
#include "comm/transports/transport.h"
#include "comm/groups/watchdog.h"
#include "lockstep/error.h"
#include "lockstep/comm/types.h"
#include "lockstep/comm/work.h"

namespace lockstep {

/// A process group: the collectives every transport offers, with what they share done once
/// here (argument checks, Avg, packing many tensors into one, ordering of async work,
/// mismatch checks, errors that name the call), and the moving of bytes left to the
/// transports: the host transport, and for a call on a device, the group's device transport
/// for that device type, where it has one (c10d chooses its backend by device type too).
///
/// Collectives run one at a time in the order they were called: a blocking call runs on
/// the caller's thread when nothing is queued, async calls on one background thread.
class Communicator {
 public:
  /// `debug`: compare every call's fingerprint across ranks before it moves any data.
  Communicator(GroupTransports transports, std::chrono::milliseconds timeout, bool debug);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  HostTransport& host_transport() { return *host_; }
  /// What moves this group's tensors, e.g. "shm+gloo" or "gloo, nccl for cuda".
  std::string transport_name() const;
  /// Whether every transport a tensor on `device` may take reduces an element alike wherever
  /// it lies in the tensor (Transport::sums_independent_of_layout).
  bool sums_independent_of_layout(at::Device device) const;

  Work all_reduce(std::vector<at::Tensor> tensors, ReduceOp op, bool blocking);
  Work broadcast(std::vector<at::Tensor> tensors, int root, bool blocking);
  Work reduce(at::Tensor tensor, int root, ReduceOp op, bool blocking);
  Work all_gather(at::Tensor tensor, bool blocking);
  Work reduce_scatter(at::Tensor input, ReduceOp op, bool blocking);
  Work reduce_to_owners(at::Tensor tensor, std::vector<OwnedRange> ranges, ReduceOp op, bool blocking);
  Work barrier(bool blocking);
  /// A tensor for collectives without staging copies (Transport::empty_shared), made in turn.
  at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype);

  /// True once a collective failed in a way that leaves the group unusable.
  bool has_failed() const;
  /// Fails the group from another thread: the collective running now, and every later
  /// call, fails with `why` (live recovery, when a member is known to be gone).
  void abort(const std::string& why);

  /// Runs `body` in this group's turn, like a collective called now: how new_group
  /// connects a sub-group in the same order on every rank of its parent.
  void run_in_call_order(const std::function<void()>& body);

  /// Refuses every later call (at shutdown, for groups that outlive it).
  void close();
  /// Every rank reached the last barrier of a shutdown(): device transports may flush
  /// their queued work when destroyed, rather than abort it (DeviceTransport).
  void leave_gracefully();

  /// How this group's collectives appear in the timeline: on the row of this member's rank
  /// in the default group, with the group's name.
  void name_for_timeline(int world_rank, std::string group_name);
  /// Collectives called on this group so far (the next one's sequence number).
  uint64_t collectives_called() const;

  /// Description of the collective running now and for how long, if one is (for watchdogs).
  std::optional<std::pair<std::string, std::chrono::steady_clock::duration>> running() const;

 private:
  using Body = std::function<std::vector<at::Tensor>(const Call&)>;
  /// A collective on `tensors` (the caller's, or host copies of device tensors), moved by
  /// `transport`; returns its outputs.
  using TensorBody =
      std::function<std::vector<at::Tensor>(const Call&, Transport& transport, std::vector<at::Tensor>& tensors)>;
  struct Task {
    Call call;
    Body body;
    std::shared_ptr<detail::WorkState> state;  // null for a blocking call run on the spot
    double queued_us = 0;                      // when it was called, on the call observer's clock (0: none watched)
    std::shared_ptr<DeviceCall> device_call;   // its tensors' device side; null on the CPU
  };

  /// What running a task gave: its outputs, or its error.
  struct TaskResult {
    std::vector<at::Tensor> outputs;
    std::exception_ptr error;
  };

  /// A call on the host transport alone.
  Work submit(Call&& call, Body body, bool blocking);
  /// `after_done` runs on the thread that waits for the work, once it succeeded.
  Work submit_in_turn(Call&& call, Body body, bool blocking, std::function<void()> after_done,
                      std::shared_ptr<DeviceCall> device_call = nullptr);
  /// submit() for a collective on `tensors`, which may be on a device (comm/transports/device_call.h).
  Work submit_on(std::vector<at::Tensor> tensors, Call&& call, TensorBody body, bool blocking);
  TaskResult execute(Task& task);
  void tell_observer(detail::CallObserver& observer, const Task& task, double started_us,
                     const std::exception_ptr& error) const;
  void run_queued_through(detail::WorkState& state);
  /// Runs `count` tasks, in order, on this thread as the one collective runner, each
  /// finishing its work's state, or with none, returning the last one's result; `lock`
  /// holds mutex_.
  TaskResult run_as_the_runner(std::unique_lock<std::mutex>& lock, Task* tasks, size_t count);
  void mark_failed(const std::string& what);
  /// The error of a call that failed because abort() was called; null otherwise.
  std::exception_ptr aborted_error(const Call& call);
  /// Throws MismatchError before `moving` moves any data, where ranks' calls differ and
  /// this group compares them (in debug mode, or where the host transport must).
  void check_same_call(const Call& call, const Transport& moving);
  /// Every rank sends what it called: how the calls differ, or "" when they do not.
  std::string how_calls_differ(const Call& call);
  std::exception_ptr explain_failure(const Call& call, const std::exception& failure,
                                     std::chrono::steady_clock::duration elapsed);
  void stop_worker();
  void worker_loop();
  /// Moves `tensors` with one primitive per dtype, on a packed buffer where a dtype has
  /// several tensors (tags counting up from `tag`), the primitives together (one NCCL
  /// group). `move(packed, tag)` runs one and returns the tensor it moved; once they all
  /// ran, `finish(moved, packed)` writes each result into its buffer, and the buffers are
  /// copied back. A template, defined and used in communicator.cpp only: a call of one
  /// tensor makes no std::function.
  template <typename Move, typename Finish>
  void move_packed(Transport& transport, std::vector<at::Tensor>& tensors, uint32_t tag, const Move& move,
                   const Finish& finish);

  const std::unique_ptr<HostTransport> host_;
  const DeviceTransports devices_;  // use host_, so they are destroyed first
  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const bool debug_;
  int timeline_rank_ = -1;
  std::string timeline_group_;

  mutable std::mutex mutex_;  // guards everything below it
  std::condition_variable changed_;
  std::deque<Task> queue_;
  bool busy_ = false;  // a collective is running, inline or on the worker
  bool stopping_ = false;
  bool closed_ = false;  // by shutdown()
  uint64_t next_seq_ = 0;
  std::string failure_;  // set once a collective failed: the group is unusable after
  std::string aborted_;  // why abort() was called, if it was
  std::thread worker_;

  mutable std::mutex running_mutex_;
  const Call* running_call_ = nullptr;
  std::chrono::steady_clock::time_point running_since_;

  Watchdog watchdog_;  // after the transports: stopped before they go
};

}  // namespace lockstep
