#pragma once

// Objects in S3 and S3-compatible stores (Ceph RGW, MinIO): GET, PUT, list and delete,
// signed with AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4), over net::HttpClient's
// pooled, retrying connections.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/http_client.h"
#include "s3/aws_config.h"
#include "s3/credentials.h"
#include "s3/s3_url.h"

namespace lockstep::s3 {

/// Where a bucket is and how to reach it; what is left empty comes from the environment
/// and the AWS profile (aws_config.h), as the AWS SDKs do.
struct S3Settings {
  std::string endpoint;    // scheme://host[:port] of an S3-compatible store; "" for AWS
  std::string region;      // "" for AWS_REGION, the profile's, or us-east-1
  std::string addressing;  // "virtual" (bucket.host) or "path" (host/bucket); "" for virtual on
                           // AWS, path on a custom endpoint
  std::string ca_file;
  double timeout = 30;
  int connections = 4;
  /// Objects larger than this are uploaded in parts of part_bytes, `connections` parts at
  /// once (S3 takes parts of 5 MiB to 5 GiB, and single PUTs up to 5 GiB).
  size_t multipart_bytes = size_t{64} << 20;
  size_t part_bytes = size_t{16} << 20;
};

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
};

class S3Client {
 public:
  /// ConfigError when no credentials are found, or `settings.addressing` is neither.
  explicit S3Client(S3Settings settings, const Environment& env = process_environment());

  /// The object's bytes; DataError naming it, S3's error code and the credentials' source.
  std::vector<uint8_t> get(const S3Url& object) const;
  /// The same, given to `arrived` piece by piece as it comes (net::HttpRequest::on_body);
  /// false when `arrived` stopped it.
  bool stream(const S3Url& object, const std::function<bool(const uint8_t*, size_t)>& arrived) const;
  /// The same as get(), or nullopt when the bucket has no such key.
  std::optional<std::vector<uint8_t>> get_if_present(const S3Url& object) const;
  /// Writes `bytes` as the object, which appears whole or not at all: one PUT, or above
  /// multipart_bytes a multipart upload that is aborted when any part fails, so that no
  /// half object and no parts are left behind.
  void put(const S3Url& object, const uint8_t* data, size_t bytes) const;
  /// Every object whose key starts with `prefix.key` + "/" (all of the bucket for an empty
  /// key), in key order, following ListObjectsV2's continuation.
  std::vector<ObjectInfo> list(const S3Url& prefix) const;
  /// Deletes the object; nothing when there is none.
  void remove(const S3Url& object) const;

  /// Where requests go, for messages: "ENDPOINT (region R, path-style)".
  std::string describe() const;

 private:
  /// The request's URL: `query` already sorted and encoded, as SigV4 needs.
  std::string url_of(const S3Url& object, const std::string& query = "") const;
  net::HttpRequest signed_request(const std::string& method) const;
  void put_in_parts(const S3Url& object, const uint8_t* data, size_t bytes) const;
  std::string put_part(const S3Url& object, const std::string& upload, size_t number, const uint8_t* data,
                       size_t bytes) const;
  void complete_upload(const S3Url& object, const std::string& upload, const std::vector<std::string>& etags) const;
  [[noreturn]] void fail(const std::string& doing, const S3Url& object, const net::HttpResponse& response) const;

  S3Settings settings_;
  bool path_style_;
  std::unique_ptr<CredentialChain> credentials_;
  net::HttpClient http_;
};

}  // namespace lockstep::s3
