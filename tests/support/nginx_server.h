#pragma once

#include <memory>
#include <string>

#include "support/tool_process.h"

namespace lockstep::testing {

/// A real nginx (Debian's) serving `folder` on 127.0.0.1, over HTTP or over HTTPS with a
/// certificate made for it by openssl; config, logs, key and certificate live in a
/// temporary folder, and the server is killed by the destructor. /forbidden/ answers 403.
/// Where nginx or openssl is not installed, available() is false and why_not() says why.
class NginxServer {
 public:
  NginxServer(const std::string& folder, bool https);
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  bool available() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  int port() const { return port_; }
  /// "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT".
  std::string url() const;
  /// The certificate clients must trust (HTTPS only): the server's own, self-signed.
  std::string certificate() const { return state_.path() + "/cert.pem"; }

 private:
  TemporaryDirectory state_;
  bool https_;
  int port_ = 0;
  std::string why_not_;
  std::unique_ptr<ToolProcess> nginx_;
};

}  // namespace lockstep::testing
