#include "support/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lockstep::testing {
namespace {

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
    : upstream_port_(upstream_port),
      fault_(fault),
      spoiled_(spoiled),
      server_([this](int client, const std::string& head, int number) { answer(client, head, number); }) {}

void FaultProxy::answer(int client, const std::string& head, int number) {
  const bool spoil = number <= spoiled_;
  if (spoil && fault_ == Fault::kAnswer503) {
    // With S3's body for it, so that an S3 client in front of a gateway meets SlowDown.
    send_all(client, http_response("503 Service Unavailable", "application/xml",
                                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
                                   "<Message>Please reduce your request rate.</Message></Error>"));
  } else if (spoil && fault_ == Fault::kStall) {
    // Until the client gives up (it closes) or the proxy stops.
    char byte;
    while (!server_.stopping()) {
      if (readable(client) && recv(client, &byte, 1, 0) <= 0) break;
    }
  } else {
    std::string asked = head;
    if (fault_ == Fault::kCloseMidBodyIgnoringRange) {
      // Without its Range line: the whole body again, with 200 (as some servers answer).
      const size_t range = asked.find("\r\nRange:");
      if (range != std::string::npos) asked.erase(range, asked.find("\r\n", range + 2) - range);
    }
    const std::string answer = ask_upstream(upstream_port_, asked);
    if (spoil) {
      const size_t body = answer.find("\r\n\r\n") + 4;
      send_all(client, answer.substr(0, body + (answer.size() - body) / 2));
    } else {
      send_all(client, answer);
    }
  }
}

}  // namespace lockstep::testing
