#pragma once

// Where a shard folder's files come from. One interface for every scheme, so that the
// dataset neither knows nor cares whether a shard is on local disk or behind a URL, and a
// new scheme (s3://) is one more implementation of read().

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/data/shards.h"

namespace lockstep::data {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// The whole of file `name` (relative to the folder); DataError naming locate(name) when
  /// it cannot be read. Safe to call from several threads at once.
  virtual std::vector<uint8_t> read(const std::string& name) const = 0;
  /// Gives file `name`'s bytes to `arrived` in order, piece by piece as they come, so that
  /// a reader can use the start of a large file before the rest is here. `arrived` returns
  /// false to stop; stream() then returns false. The default gives read() in one piece.
  using Arrived = std::function<bool(const uint8_t*, size_t)>;
  virtual bool stream(const std::string& name, const Arrived& arrived) const {
    const std::vector<uint8_t> bytes = read(name);
    return arrived(bytes.data(), bytes.size());
  }
  /// Where `name` is, for messages: a path or a URL.
  virtual std::string locate(const std::string& name) const = 0;
  /// Drops any copy kept of `name` (a cached copy that failed its checks).
  virtual void drop_copy(const std::string& /*name*/) const {}
};

/// The source for a folder given as a local path or an http:// or https:// URL.
std::shared_ptr<ByteSource> open_byte_source(const std::string& folder, const ShardOptions& options);

/// `origin` through a local cache folder holding at most `limit` bytes of copies, least
/// recently used dropped first (cached_source.cpp).
std::shared_ptr<ByteSource> cached_source(std::shared_ptr<ByteSource> origin, const std::string& cache, size_t limit);

/// An http:// or https:// folder (http_source.cpp).
std::shared_ptr<ByteSource> open_http_source(const std::string& url, const ShardOptions& options);

/// An s3://BUCKET/PREFIX folder (s3_source.cpp).
std::shared_ptr<ByteSource> open_s3_source(const std::string& url, const ShardOptions& options);

}  // namespace lockstep::data
