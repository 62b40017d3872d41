#pragma once

#include <string>
#include <vector>

namespace lockstep::testing {

/// Two hosts, each a network namespace with its own address, joined by a veth pair: what the
/// multi-node tests run their launchers in. Made by the constructor and removed by the
/// destructor; where the test may not make namespaces (no CAP_SYS_ADMIN, no `ip`),
/// available() is false and why_not() says why.
class NetworkHosts {
 public:
  NetworkHosts();
  ~NetworkHosts();
  NetworkHosts(const NetworkHosts&) = delete;
  NetworkHosts& operator=(const NetworkHosts&) = delete;

  bool available() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }

  /// Host 0's or host 1's address.
  std::string address(int host) const;
  /// Takes host `host`'s end of the link down: it is cut off, its processes still running.
  void cut_off(int host) const;
  /// `command` run inside host `host`'s namespace.
  std::vector<std::string> on(int host, const std::vector<std::string>& command) const;

 private:
  std::string names_[2];
  std::string subnet_;  // "10.a.b."
  std::string why_not_;
};

}  // namespace lockstep::testing
