#pragma once

#include <sys/types.h>

#include <chrono>
#include <set>

namespace lockstep {

/// The sockets of this process, by inode (fd numbers are reused; an inode names one socket
/// while it lives). The only handle lockstep has on the connections of the libraries it
/// uses: gloo's tcp headers need one Debian's libgloo-dev does not ship
/// (gloo/common/memory.h), and c10d's store client keeps its socket to itself.
std::set<ino_t> process_sockets();
/// The sockets of this process now that are not in `before`: those a call just opened.
std::set<ino_t> opened_since(const std::set<ino_t>& before);

/// Shuts down, both ways, each socket of this process in `sockets` that is still open:
/// every operation waiting on it fails at once, as when its peer closes.
void shut_down(const std::set<ino_t>& sockets);

/// Makes each of `sockets` fail once its peer has left what it sent, or its keepalive
/// probes, unacknowledged for `silence` (TCP_USER_TIMEOUT): a peer cut off sends no reset,
/// and a call waiting on it would wait forever. The peer's kernel acknowledges however busy
/// its process is: only a lost link or machine makes such silence.
void fail_when_silent(const std::set<ino_t>& sockets, std::chrono::seconds silence);

/// How long a store's host may be silent so before a client's call fails.
constexpr std::chrono::seconds kStoreSilence{10};

/// Runs `connect`, which opens a c10d store client, and returns the client, its connections
/// failing after kStoreSilence of a silent host (fail_when_silent).
template <typename Connect>
auto with_bounded_silence(Connect connect) {
  const std::set<ino_t> before = process_sockets();
  auto client = connect();
  fail_when_silent(opened_since(before), kStoreSilence);
  return client;
}

}  // namespace lockstep
