#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "comm/calls/call.h"
#include "comm/transports/device_call.h"
#include "comm/transports/transport.h"

namespace lockstep {

/// Once a watchdog has begun ending the job, a thread that would go on to report a failure
/// that ending caused (the peer it aborted for) or leave the process with a status of its
/// own waits here for the watchdog's exit instead. Returns at once otherwise.
void wait_if_the_job_is_ending();

/// Ends the job, rather than let it hang forever, when work that nothing can interrupt
/// outlives a group's timeout: a call on a host transport that cannot give up (MPI), or work
/// queued on a device transport's stream (NCCL), which the host never waits for. Also ends
/// it when a device transport finds an error on its own. One thread per group, started on
/// first need.
class Watchdog {
 public:
  /// The collective running now on the host and for how long, if one is.
  using Running = std::function<std::optional<std::pair<std::string, std::chrono::steady_clock::duration>>()>;

  /// `host` and `devices` are the group's, and outlive this.
  Watchdog(int rank, std::chrono::milliseconds timeout, HostTransport& host, const DeviceTransports& devices,
           Running running);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Watches every host call: for a host transport that cannot give up.
  void watch_host_calls();
  /// Watches `device_call`'s queued device work until the device finishes it.
  void watch_device_work(const Call& call, std::shared_ptr<DeviceCall> device_call);

 private:
  struct DeviceWork {
    Call call;  // described only when it fails
    std::chrono::steady_clock::time_point queued;
    std::shared_ptr<DeviceCall> device_call;
  };

  void start();  // mutex_ held
  void watch();
  void check_host_call();
  void check_device_work();  // mutex_ held
  /// The first error a device transport found on its own, or "".
  std::string device_error();
  [[noreturn]] void end_job(const std::string& why);

  const int rank_;
  const std::chrono::milliseconds timeout_;
  HostTransport& host_;
  const DeviceTransports& devices_;
  const Running running_;

  std::mutex mutex_;  // guards what follows
  std::condition_variable stop_;
  bool stopping_ = false;
  bool host_calls_ = false;
  std::deque<DeviceWork> device_work_;  // oldest first
  std::thread thread_;
};

}  // namespace lockstep
