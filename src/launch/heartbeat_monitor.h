#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10d {
class TCPStore;
}

namespace lockstep::launch {

/// Watches the heartbeats (job/heartbeat.h) of this launcher's workers in the job's store.
/// A worker is watched from its first beat on (a program that never joins a lockstep world
/// never beats, and is not a hung one); one whose count then stops rising for `timeout` is
/// hung: stopped (SIGSTOP), or stuck so hard that none of its threads runs.
class HeartbeatMonitor {
 public:
  HeartbeatMonitor(const std::string& host, int port, int restart_count, std::vector<int> ranks,
                   std::chrono::milliseconds timeout);
  ~HeartbeatMonitor();

  /// A hung worker's rank, if there is one now.
  std::optional<int> hung();
  /// Worker `rank` was started again (live recovery) as `incarnation`: its beats count
  /// under a key of their own, watched from its first.
  void restarted(int rank, int incarnation);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Seen {
    int64_t count = 0;
    Clock::time_point changed;
  };

  std::unique_ptr<c10d::TCPStore> store_;
  int restart_count_;
  std::vector<int> ranks_;
  std::chrono::milliseconds timeout_;
  std::map<int, Seen> seen_;
  std::map<int, int> incarnations_;  // of workers started again
};

}  // namespace lockstep::launch
