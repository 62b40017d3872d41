#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "lockstep/error.h"

// Checks made before handing an address to libtorch's TCPStore, whose own retries log
// through glog and end in multi-line errors: these fail with one line that says what to fix.
namespace lockstep {

/// Waits until something accepts connections at host:port, or throws ConfigError when the
/// host cannot be resolved or the deadline passes.
void wait_until_listening(const std::string& host, int port, std::chrono::milliseconds timeout);

/// Why `host` does not resolve to an address (getaddrinfo's reason), or nothing when it does.
std::optional<std::string> why_unresolvable(const std::string& host);

/// Throws ConfigError when this machine cannot listen on `port`.
void check_port_free(int port);

/// The error for a MASTER_PORT that rank 0 cannot listen on, for `reason` ("Address already
/// in use"): one wording whether check_port_free or the store's own bind found it.
ConfigError cannot_host_store(int port, const std::string& reason);

}  // namespace lockstep
