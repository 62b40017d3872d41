#pragma once

#include <memory>
#include <string>

#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {

/// A real S3: a one-node Ceph cluster and its RADOS Gateway (Debian's ceph-mon, ceph-osd,
/// radosgw) on 127.0.0.1, state in a temporary folder (tests/support/s3_gateway.sh), with
/// one user. Started by the constructor (about 15 s); the cluster goes with the fixture,
/// and with this process however it ends (setpriv's parent-death signal). Where it cannot
/// start, available() is false and why_not() says why.
class S3Gateway {
 public:
  S3Gateway();
  ~S3Gateway();
  S3Gateway(const S3Gateway&) = delete;
  S3Gateway& operator=(const S3Gateway&) = delete;

  bool available() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  /// "http://127.0.0.1:PORT" (path-style), and "http://localhost:PORT", whose subdomains
  /// libcurl resolves to loopback itself (virtual-hosted: BUCKET.localhost).
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string virtual_endpoint() const { return "http://localhost:" + std::to_string(port_); }
  int port() const { return port_; }
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }
  /// The user's keys as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
  Env credentials() const;
  /// Temporary credentials from the gateway's STS (AssumeRole of role `session`) that
  /// expire after `seconds`, as AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
  /// AWS_SESSION_TOKEN; empty, with the reason in `why`, when the gateway refused.
  Env session_credentials(int seconds, std::string* why = nullptr) const;
  /// Makes bucket `name`; false with the reason in `why` when the gateway refused.
  bool make_bucket(const std::string& name, std::string* why = nullptr) const;
  /// The gateway's log, with a line per request ("GET /bucket/key ...").
  std::string log_text() const;

 private:
  TemporaryDirectory state_;
  int port_ = 0;
  std::string access_key_, secret_key_, why_not_;
  std::unique_ptr<ToolProcess> cluster_;
};

}  // namespace lockstep::testing
