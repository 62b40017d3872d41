#include "support/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace lockstep::testing {
namespace {

// Waits up to 100 ms for `fd` to be readable; false when it is not.
bool readable(int fd) {
  pollfd wanted{fd, POLLIN, 0};
  return poll(&wanted, 1, 100) > 0;
}

// The request head, up to its blank line; empty when the client went away.
std::string read_head(int fd, const std::atomic<bool>& stopping) {
  std::string head;
  char buffer[4096];
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (stopping) return "";
    if (!readable(fd)) continue;
    const ssize_t got = recv(fd, buffer, sizeof buffer, 0);
    if (got <= 0) return "";
    head.append(buffer, static_cast<size_t>(got));
  }
  return head;
}

void send_all(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t wrote = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (wrote <= 0) return;
    sent += static_cast<size_t>(wrote);
  }
}

// The upstream's whole answer to `head`, asked with Connection: close so that it ends.
std::string ask_upstream(int port, std::string head) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    head.insert(head.size() - 2, "Connection: close\r\n");
    send_all(fd, head);
    char buffer[1 << 16];
    for (ssize_t got; (got = recv(fd, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  return answer;
}

}  // namespace

FaultProxy::FaultProxy(int upstream_port, Fault fault, int spoiled)
    : upstream_port_(upstream_port), fault_(fault), spoiled_(spoiled) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  const int yes = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener_, 64) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("FaultProxy cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FaultProxy::~FaultProxy() {
  stopping_ = true;
  acceptor_.join();
  close(listener_);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& connection : connections_) connection.join();
}

void FaultProxy::accept_loop() {
  while (!stopping_) {
    if (!readable(listener_)) continue;
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.emplace_back([this, client] { serve(client); });
  }
}

void FaultProxy::serve(int client) {
  const std::string head = read_head(client, stopping_);
  if (!head.empty()) {
    const bool spoil = ++requests_ <= spoiled_;
    if (spoil && fault_ == Fault::kAnswer503) {
      // With S3's body for it, so that an S3 client in front of a gateway meets SlowDown.
      const std::string slow_down =
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
          "<Message>Please reduce your request rate.</Message></Error>";
      send_all(client, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: " +
                           std::to_string(slow_down.size()) + "\r\nConnection: close\r\n\r\n" + slow_down);
    } else if (spoil && fault_ == Fault::kStall) {
      // Until the client gives up (it closes) or the proxy stops.
      char byte;
      while (!stopping_) {
        if (readable(client) && recv(client, &byte, 1, 0) <= 0) break;
      }
    } else {
      const std::string answer = ask_upstream(upstream_port_, head);
      if (spoil) {
        const size_t body = answer.find("\r\n\r\n") + 4;
        send_all(client, answer.substr(0, body + (answer.size() - body) / 2));
      } else {
        send_all(client, answer);
      }
    }
  }
  close(client);
}

}  // namespace lockstep::testing
