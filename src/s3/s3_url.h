#pragma once

#include <optional>
#include <string>

namespace lockstep::s3 {

/// An object or a prefix in a bucket: s3://BUCKET/KEY.
struct S3Url {
  std::string bucket;
  std::string key;  // no leading '/'; a folder's prefix has no trailing '/' either

  std::string str() const { return "s3://" + bucket + (key.empty() ? "" : "/" + key); }
  /// The object `name` under this prefix.
  S3Url child(const std::string& name) const { return {bucket, key.empty() ? name : key + "/" + name}; }
};

/// Whether `text` is an s3:// URL.
bool is_s3_url(const std::string& text);

/// s3://BUCKET[/KEY]; ConfigError naming `text` when the bucket's name is not one S3
/// allows (3 to 63 lower-case letters, digits, '.' and '-', starting and ending with a
/// letter or digit).
S3Url parse_s3_url(const std::string& text);

/// `text` with every byte but RFC 3986's unreserved ones (A-Z a-z 0-9 - . _ ~) as %XX, and
/// '/' kept where `keep_slash`: how SigV4 wants paths and query values.
std::string uri_encode(const std::string& text, bool keep_slash);

}  // namespace lockstep::s3
