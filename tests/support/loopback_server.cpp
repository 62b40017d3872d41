#include "support/loopback_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace lockstep::testing {
namespace {

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

}  // namespace

bool readable(int fd) {
  pollfd wanted{fd, POLLIN, 0};
  return poll(&wanted, 1, 100) > 0;
}

void send_all(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t wrote = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (wrote <= 0) return;
    sent += static_cast<size_t>(wrote);
  }
}

std::string http_response(const std::string& status, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

LoopbackServer::LoopbackServer(Answer answer) : answer_(std::move(answer)) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  const int yes = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener_, 64) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("LoopbackServer cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

LoopbackServer::~LoopbackServer() {
  stopping_ = true;
  acceptor_.join();
  close(listener_);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& connection : connections_) connection.join();
}

int LoopbackServer::requests_with(const std::string& part) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int count = 0;
  for (const auto& head : heads_) count += head.find(part) != std::string::npos ? 1 : 0;
  return count;
}

void LoopbackServer::accept_loop() {
  while (!stopping_) {
    if (!readable(listener_)) continue;
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.emplace_back([this, client] { serve(client); });
  }
}

void LoopbackServer::serve(int client) {
  const std::string head = read_head(client, stopping_);
  if (!head.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      heads_.push_back(head);
    }
    answer_(client, head, ++requests_);
  }
  close(client);
}

}  // namespace lockstep::testing
