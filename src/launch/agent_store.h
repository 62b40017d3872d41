#pragma once

#include <memory>
#include <string>

namespace c10d {
class TCPStore;
}

namespace lockstep::launch {

/// The c10d TCPStore server the launcher hosts for its workers, as torchrun's agent does:
/// the store outlives any one worker, and rank 0 need not open a port itself.
class AgentStore {
 public:
  /// Listens on `port` on every interface (0: a free port the kernel picks) and checks the
  /// server answers at `host`. Throws lockstep::Error naming the port when it cannot listen.
  AgentStore(const std::string& host, int port);
  ~AgentStore();

  AgentStore(const AgentStore&) = delete;
  AgentStore& operator=(const AgentStore&) = delete;

  /// The port workers connect to; the chosen one when constructed with port 0.
  int port() const;

 private:
  std::unique_ptr<c10d::TCPStore> store_;
};

}  // namespace lockstep::launch
