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
#include "comm/device_call.h"
#include "comm/transport.h"
#include "lockstep/comm/error.h"
#include "lockstep/comm/types.h"
#include "lockstep/comm/work.h"

namespace lockstep {

/// A process group: the collectives every transport offers, with what they share done once
/// here (argument checks, Avg, packing many tensors into one, ordering of async work,
/// mismatch checks, errors that name the call), and the moving of bytes left to the
/// transport.
///
/// Collectives run one at a time in the order they were called: a blocking call runs on
/// the caller's thread when nothing is queued, async calls on one background thread.
class Communicator {
 public:
  /// `backend` is the engine the user chose (what lockstep::backend() reports), whatever
  /// transport carries this group's bytes.
  Communicator(std::unique_ptr<Transport> transport, Backend backend,
               std::chrono::milliseconds timeout, bool debug);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Backend backend() const { return backend_; }
  Transport& transport() { return *transport_; }

  Work all_reduce(std::vector<at::Tensor> tensors, ReduceOp op, bool blocking);
  Work broadcast(std::vector<at::Tensor> tensors, int root, bool blocking);
  Work reduce(at::Tensor tensor, int root, ReduceOp op, bool blocking);
  Work all_gather(at::Tensor tensor, bool blocking);
  Work reduce_scatter(at::Tensor input, ReduceOp op, bool blocking);
  Work barrier(bool blocking);
  /// A tensor for collectives without staging copies (Transport::empty_shared), made in turn.
  at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype);

  /// True once a collective failed in a way that leaves the group unusable.
  bool has_failed() const;

  /// Runs `body` in this group's turn, like a collective called now: how new_group
  /// connects a sub-group in the same order on every rank of its parent.
  void run_in_order(const std::function<void()>& body);

  /// Refuses every later call (at shutdown, for groups that outlive it).
  void close();

  /// Description of the collective running now and for how long, if one is (for watchdogs).
  std::optional<std::pair<std::string, std::chrono::steady_clock::duration>> running() const;

 private:
  using Body = std::function<std::vector<at::Tensor>(const Call&)>;
  /// A collective on host tensors (the caller's, or host copies of device tensors); returns
  /// its outputs.
  using TensorBody = std::function<std::vector<at::Tensor>(const Call&, std::vector<at::Tensor>& tensors)>;
  struct Task {
    Call call;
    Body body;
    std::shared_ptr<detail::WorkState> state;
  };

  /// `after_done` runs on the thread that waits for the work, once it succeeded.
  Work submit(Call call, Body body, bool blocking, std::function<void()> after_done = nullptr);
  /// submit() for a collective on `tensors`, which may be on a device (comm/device_call.h).
  Work submit_on(std::vector<at::Tensor> tensors, Call call, TensorBody body, bool blocking);
  void execute(Task& task);
  void run_queued_through(detail::WorkState& state);
  /// Runs `tasks` on this thread as the one collective runner; `lock` holds mutex_.
  void run_in_turn(std::unique_lock<std::mutex>& lock, std::deque<Task>& tasks);
  void mark_failed(const std::string& what);
  void check_same_call(const Call& call);
  /// Every rank sends what it called: how the calls differ, or "" when they do not.
  std::string how_calls_differ(const Call& call);
  std::exception_ptr explain_failure(const Call& call, const std::exception& failure,
                                     std::chrono::steady_clock::duration elapsed);
  void stop_worker();
  void worker_loop();
  /// Has the watchdog end the job if `device_call`'s queued device work outlives the timeout.
  void watch_device_work(const Call& call, std::shared_ptr<DeviceCall> device_call);
  void start_watchdog();  // watch_mutex_ held
  void watch();
  [[noreturn]] void end_job(const std::string& why);
  /// Runs `run` on each tensor, or, for several, on one packed buffer per dtype (tags
  /// counting up from `tag`), copying the results back.
  void for_each_packed(std::vector<at::Tensor>& tensors, uint32_t tag,
                       const std::function<void(at::Tensor&, uint32_t)>& run);

  const std::unique_ptr<Transport> transport_;
  const int rank_;
  const int world_size_;
  const Backend backend_;
  const std::chrono::milliseconds timeout_;
  const bool debug_;

  mutable std::mutex mutex_;  // guards everything below it
  std::condition_variable changed_;
  std::deque<Task> queue_;
  bool busy_ = false;  // a collective is running, inline or on the worker
  bool stopping_ = false;
  bool closed_ = false;  // by shutdown()
  uint64_t next_seq_ = 0;
  std::string failure_;  // set once a collective failed: the group is unusable after
  std::thread worker_;

  mutable std::mutex running_mutex_;
  const Call* running_call_ = nullptr;
  std::chrono::steady_clock::time_point running_since_;

  // For transports that cannot give up (see Transport::can_give_up), and for device work
  // queued on a transport's stream (NCCL), which the host never waits for.
  struct DeviceWork {
    Call call;  // described only when it fails
    std::chrono::steady_clock::time_point queued;
    std::shared_ptr<DeviceCall> device_call;
  };
  std::mutex watch_mutex_;  // guards what follows
  std::condition_variable watch_stop_;
  bool stop_watching_ = false;
  std::deque<DeviceWork> device_work_;  // oldest first
  std::thread watchdog_;
};

}  // namespace lockstep
