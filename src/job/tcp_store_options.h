#pragma once

#include <chrono>
#include <cstdint>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace lockstep {
namespace detail {

// libtorch 2.2 added a libuv server beside the classic one and 2.4 made it the default; a
// libtorch built without libuv (Debian's 2.6) then refuses every store. The classic server
// is on every release from 1.13 on, so lockstep asks for it wherever there is a choice.
template <typename Options>
auto choose_classic_server(Options& options, int) -> decltype(options.useLibUV = false, void()) {
  options.useLibUV = false;
}
template <typename Options>
void choose_classic_server(Options&, long) {}  // before 2.2: the classic server is the only one

}  // namespace detail

/// Options for a c10d::TCPStore server or client that does not wait for workers to connect
/// (lockstep's rendezvous counts its ranks itself), the same on every libtorch release.
inline c10d::TCPStoreOptions tcp_store_options(int port, bool is_server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = is_server;
  options.waitWorkers = false;
  options.timeout = timeout;
  detail::choose_classic_server(options, 0);
  return options;
}

}  // namespace lockstep
