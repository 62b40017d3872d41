#pragma once

#include <chrono>
#include <string>

// Checks made before handing an address to libtorch's TCPStore, whose own retries log
// through glog and end in multi-line errors: these fail with one line that says what to fix.
namespace lockstep {

/// Waits until something accepts connections at host:port, or throws ConfigError when the
/// host cannot be resolved or the deadline passes.
void wait_until_listening(const std::string& host, int port, std::chrono::milliseconds timeout);

/// Throws ConfigError when this machine cannot listen on `port`.
void check_port_free(int port);

}  // namespace lockstep
