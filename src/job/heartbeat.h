#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace c10d {
class TCPStore;
}

namespace lockstep {

/// The store key a worker's heartbeats count up, for `lockstep run`'s watch over it: per
/// attempt of the job, worker (its first rank) and, for a worker started again in live
/// recovery, incarnation, so that a replacement's count starts afresh.
inline std::string heartbeat_key(int restart_count, int member_id, int incarnation = 0) {
  return "lockstep/heartbeat/attempt-" + std::to_string(restart_count) + "/" + std::to_string(member_id) +
         (incarnation > 0 ? "/incarnation-" + std::to_string(incarnation) : "");
}

/// Beats about once a second, from its own thread and store connection, for as long as this
/// rank is joined: the launcher names a worker whose count stops rising (stopped, or stuck
/// so hard that no thread of it runs) as hung.
class Heartbeat {
 public:
  Heartbeat(const std::string& host, int port, std::string key);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  static constexpr std::chrono::seconds kEvery{1};

 private:
  void beat();

  std::unique_ptr<c10d::TCPStore> store_;
  std::string key_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace lockstep
