#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "job/process_sockets.h"
#include "job/tcp_store_options.h"

namespace lockstep::launch {

/// A client of the job's store (node 0's launcher hosts the server), waiting up to `timeout`
/// for it; its calls fail once node 0 is silent for kStoreSilence (cut off), not never. One
/// per use that must not wait behind another (beats, watching, agreeing).
inline std::unique_ptr<c10d::TCPStore> connect_store_client(const std::string& host, int port,
                                                            std::chrono::milliseconds timeout) {
  return with_bounded_silence(
      [&] { return std::make_unique<c10d::TCPStore>(host, tcp_store_options(port, /*is_server=*/false, timeout)); });
}

}  // namespace lockstep::launch
