#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace lockstep::launch {

/// A client of the job's store (node 0's launcher hosts the server), waiting up to `timeout`
/// for it. One per use that must not wait behind another (beats, watching, agreeing).
inline std::unique_ptr<c10d::TCPStore> connect_store_client(const std::string& host, int port,
                                                            std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  return std::make_unique<c10d::TCPStore>(host, options);
}

}  // namespace lockstep::launch
