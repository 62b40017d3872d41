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

/// The store key a worker's heartbeats count up, for `lockstep run`'s watch over it.
inline std::string heartbeat_key(int restart_count, int rank) {
  return "lockstep/heartbeat/attempt-" + std::to_string(restart_count) + "/" + std::to_string(rank);
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
