#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::testing {

/// An HTTP server of the tests' own on 127.0.0.1: one request per connection, each on a
/// thread of its own, answered by `answer` from the request's head (the fault proxy, the
/// container credentials endpoint).
class LoopbackServer {
 public:
  /// `answer(client, head, number)` writes the response to socket `client` (closed after
  /// it); `number` counts the requests from 1, in the order they arrived.
  using Answer = std::function<void(int client, const std::string& head, int number)>;
  explicit LoopbackServer(Answer answer);
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Requests received so far.
  int requests() const { return requests_.load(); }
  /// Requests received so far whose head contains `part` (a path, a header).
  int requests_with(const std::string& part) const;
  /// True once the destructor runs: answers that wait should stop.
  bool stopping() const { return stopping_.load(); }

 private:
  void accept_loop();
  void serve(int client);

  Answer answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  mutable std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::vector<std::string> heads_;
  std::thread acceptor_;
};

/// Waits up to 100 ms for `fd` to be readable; false when it is not.
bool readable(int fd);
/// Writes all of `bytes`, or stops when the peer is gone.
void send_all(int fd, const std::string& bytes);
/// "HTTP/1.1 STATUS\r\n" with Content-Length, `type`, Connection: close, and `body`.
std::string http_response(const std::string& status, const std::string& type, const std::string& body);

}  // namespace lockstep::testing
