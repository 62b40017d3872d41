#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/arg.h>

#include "lockstep/data/dataset.h"

namespace lockstep::data {

/// How `lockstep data pack` writes a split.
struct PackOptions {
  /// A shard ends before the sample that would take it past this many bytes (a sample
  /// larger than this gets a shard of its own).
  TORCH_ARG(size_t, shard_bytes) = size_t{64} << 20;
  /// Written into the index for readers that want names; may be empty.
  TORCH_ARG(std::vector<std::string>, class_names);
  /// Where `out` is an s3://BUCKET/PREFIX: the store, as ShardOptions has them.
  TORCH_ARG(std::string, endpoint);
  TORCH_ARG(std::string, region);
  TORCH_ARG(std::string, addressing);
  TORCH_ARG(std::string, ca_file);
};

/// What pack_shards wrote.
struct PackSummary {
  size_t samples = 0;
  size_t shards = 0;
  size_t bytes = 0;
  std::string index;  // the index file's path
};

/// Writes split `split` of `dataset` into folder `out` (or an s3://BUCKET/PREFIX) as WebDataset-style tar shards
/// (<split>-000000.tar, ...: per sample <key>.jpg or <key>.npy and <key>.cls) and their
/// index <split>.index.json, in the dataset's order. JPEG files are kept byte for byte;
/// other images are stored as uint8 .npy arrays. Each file is written under a temporary
/// name and renamed, the index last, so a reader never sees a half-written split.
PackSummary pack_shards(const Dataset& dataset, const std::string& split, const std::string& out,
                        PackOptions options = PackOptions());

/// How a ShardDataset reads.
struct ShardOptions {
  /// Channels JPEG members decode to (1 or 3); 0 takes those the index records.
  TORCH_ARG(int, channels) = 0;
  /// Classes of shards named by a pattern, which have no index to say it; 0 otherwise.
  TORCH_ARG(int64_t, classes) = 0;
  /// Whole shards kept in memory, least recently used dropped first, up to this many bytes
  /// (at least one shard is always kept): a shard is read once while the sampler walks it
  /// (see SamplerOptions::shuffle_window).
  TORCH_ARG(size_t, memory_bytes) = size_t{512} << 20;
  /// For https:// folders: a PEM file of certificate authorities to trust (a private CA);
  /// empty trusts the system's. Certificates are always verified.
  TORCH_ARG(std::string, ca_file);
  /// Seconds an HTTP(S) connection may take to open or a transfer may stall before it is
  /// retried. Resets, stalls and 5xx answers are retried with exponential backoff for at
  /// most 4 x timeout in all; 4xx answers are not.
  TORCH_ARG(double, timeout) = 30;
  /// HTTP(S) connections this dataset keeps open at most (reused between shards).
  TORCH_ARG(int, connections) = 4;
  /// For s3:// folders: an S3-compatible store's http(s)://HOST[:PORT] (empty: AWS_ENDPOINT_URL_S3,
  /// AWS_ENDPOINT_URL, the AWS profile's endpoint_url, else AWS), the region (empty:
  /// AWS_REGION, the profile's, else us-east-1) and the addressing, "virtual"
  /// (BUCKET.HOST) or "path" (HOST/BUCKET); empty: virtual on AWS, path on an endpoint.
  /// Credentials are found as the AWS SDKs find them (docs/DATA.md, "S3").
  TORCH_ARG(std::string, endpoint);
  TORCH_ARG(std::string, region);
  TORCH_ARG(std::string, addressing);
  /// A local folder keeping copies of the shards read (from a URL or a network file
  /// system), so that a later epoch, a restarted job or another worker of the machine
  /// reads them from local disk; empty keeps none. Copies are written whole (renamed into
  /// place) and checked like any read (one that fails is read again from the origin). Past
  /// cache_bytes, copies unused since the dataset opened go, least recently used first;
  /// copies in use are kept and a new one is not, so that an epoch walking every shard
  /// still finds the cached ones. The index is always read afresh.
  TORCH_ARG(std::string, cache);
  TORCH_ARG(size_t, cache_bytes) = size_t{10} << 30;
  /// A local file for a copy of the split's index, private to one job: read instead of the
  /// origin's index when it exists, written after reading it otherwise. lockstep train's
  /// launcher and its workers share one, so a job reads each index once, whatever its
  /// number of workers.
  TORCH_ARG(std::string, index_copy);
};

/// A split written by pack_shards, from local disk or an HTTP(S) server (libcurl, TLS
/// verified, connections reused), read shard by shard: each shard is read whole the first
/// time one of its examples is asked for, checked against the index (size, CRC-32), and
/// kept in memory while it is used. shard_sizes() lets the sampler walk shards, not scatter
/// across them. A shard that changed, is cut short or holds a bad member throws DataError
/// naming the shard and the member.
class ShardDataset : public Dataset {
 public:
  /// Opens `<folder>/<split>.index.json`; `folder` is a local path or an http:// or https://
  /// URL. DataError naming the file or URL (and the HTTP status) when it is missing or bad.
  /// A `split` with a brace pattern ("train-{000000..000127}.tar") names shards that have
  /// no index: each is read once at opening to count its samples, and options.classes()
  /// must say how many classes they hold.
  ShardDataset(const std::string& folder, const std::string& split, ShardOptions options = ShardOptions());
  ~ShardDataset() override;

  size_t size() const override;
  Sample get(size_t index) const override;
  int64_t num_classes() const override;
  std::string describe(size_t index) const override;
  std::vector<size_t> shard_sizes() const override;

  /// The class names the index records (empty when it has none).
  const std::vector<std::string>& class_names() const;
  /// How many times a shard was read from its source (a second epoch that fits in memory
  /// reads none).
  int64_t shard_reads() const;

 private:
  struct State;  // index, source and the shards in memory, kept out of this header
  std::unique_ptr<State> state_;
};

}  // namespace lockstep::data
