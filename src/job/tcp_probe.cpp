#include "job/tcp_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "lockstep/error.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

std::string where(const std::string& host, int port) {
  return "MASTER_ADDR=" + host + " MASTER_PORT=" + std::to_string(port);
}

// One non-blocking connect attempt bounded by `limit`; returns 0 or the errno.
int try_connect(const addrinfo& address, std::chrono::milliseconds limit) {
  const int fd = socket(address.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int error = 0;
  if (connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      if (poll(&waiting, 1, static_cast<int>(limit.count())) == 1) {
        socklen_t length = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      } else {
        error = ETIMEDOUT;
      }
    }
  }
  close(fd);
  return error;
}

}  // namespace

std::optional<std::string> why_unresolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (resolved != 0) return std::string(gai_strerror(resolved));
  freeaddrinfo(found);
  return std::nullopt;
}

void wait_until_listening(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    throw ConfigError("lockstep: cannot reach the rendezvous store at " + where(host, port) + ": cannot resolve '" +
                      host + "' (" + gai_strerror(resolved) + "); set MASTER_ADDR to rank 0's host name or address");
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  const auto deadline = Clock::now() + timeout;
  int last_error = 0;
  while (true) {
    for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      last_error = try_connect(*a, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(1000)));
      if (last_error == 0) return;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not be up yet
  }
  throw ConfigError("lockstep: cannot reach the rendezvous store at " + where(host, port) + " within " +
                    std::to_string(timeout.count()) + " ms (" + std::strerror(last_error) +
                    "); check that rank 0 runs and MASTER_ADDR is reachable from this machine");
}

void check_port_free(int port) {
  const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int reuse = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_any;
  address.sin6_port = htons(static_cast<uint16_t>(port));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  const int error = errno;
  close(fd);
  if (!free) throw cannot_host_store(port, std::strerror(error));
}

ConfigError cannot_host_store(int port, const std::string& reason) {
  return ConfigError("lockstep: rank 0 cannot host the rendezvous store on MASTER_PORT=" + std::to_string(port) + " (" +
                     reason + "); pick a free MASTER_PORT");
}

}  // namespace lockstep
