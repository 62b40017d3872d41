#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "s3/aws_config.h"

namespace lockstep::s3 {

/// What signs S3 requests. The secret and the token never appear in a message: `source`
/// says where they came from instead.
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string source;  // "the environment (AWS_ACCESS_KEY_ID)", "profile 'p' in FILE", ...
  std::optional<std::chrono::system_clock::time_point> expires;
};

/// Credentials found in the order the AWS SDKs look: AWS_ACCESS_KEY_ID and
/// AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN); the profile (AWS_PROFILE, else
/// "default") in the shared credentials file, then in the config file; the container
/// credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI, with
/// AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE, as ECS and EKS Pod Identity set them),
/// fetched again five minutes before they expire.
class CredentialChain {
 public:
  /// Looks now; ConfigError saying where it looked when nothing has credentials, or
  /// naming the file and profile when a named profile is not there.
  explicit CredentialChain(Environment env);

  /// The current credentials. Safe to call from several threads at once.
  Credentials get();

 private:
  Credentials from_container() const;

  Environment env_;
  std::mutex mutex_;
  Credentials current_;
  bool from_container_ = false;
};

}  // namespace lockstep::s3
