#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::testing {

/// What a FaultProxy does to the requests it spoils.
enum class Fault {
  kCloseMidBody,  // sends the response head and half the body, then closes the connection
  kAnswer503,     // answers 503 Service Unavailable (with S3's SlowDown body) without asking the server
  kStall,         // reads the request and never answers
};

/// An HTTP proxy on 127.0.0.1 in front of a real server (nginx on `upstream_port`) that
/// spoils the first `spoiled` requests with `fault` and passes the others through, one
/// request per connection. For the faults a client meets on real networks.
class FaultProxy {
 public:
  FaultProxy(int upstream_port, Fault fault, int spoiled);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Requests received so far, spoiled or not.
  int requests() const { return requests_.load(); }

 private:
  void accept_loop();
  void serve(int client);

  int upstream_port_;
  Fault fault_;
  int spoiled_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::thread acceptor_;
};

}  // namespace lockstep::testing
