#pragma once

// A shard used while it downloads: its bytes checked block by block against the index and
// its samples listed from the checked part, so that a loader decodes the first samples of a
// 10 MB shard while the rest is still on the wire, and never a byte that failed its check.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "data/formats/shard_index.h"
#include "data/formats/tar_format.h"

namespace lockstep::data {

/// One sample's members inside its shard.
struct SampleMembers {
  std::string key;
  TarMember image;
  std::string image_kind;  // "jpg" or "npy"
  TarMember label;
};

/// Groups a shard's members into samples by WebDataset's convention (a member's key is its
/// path up to the first dot of its file name), one member at a time.
class SampleGrouper {
 public:
  explicit SampleGrouper(std::string shard) : shard_(std::move(shard)) {}
  /// The sample that `member` closes (the one before it, once a new key starts), if any.
  std::optional<SampleMembers> add(const TarMember& member);
  /// The last sample, if any. Each closed sample is checked: DataError when it lacks an
  /// image or a label.
  std::optional<SampleMembers> finish();

 private:
  SampleMembers close();
  std::string shard_;
  std::optional<SampleMembers> open_;
  bool open_has_label_ = false;
};

/// Every sample of a whole archive's members.
std::vector<SampleMembers> group_samples(const std::vector<TarMember>& members, const std::string& shard);

/// A shard as it arrives. One thread gives the bytes (start_over, arrive..., finish, or
/// fail); any number of others wait for samples.
class ArrivingShard {
 public:
  /// `block_bytes` as in ShardIndex; without block checksums the shard is checked whole,
  /// and its samples wait for all of it.
  ArrivingShard(ShardEntry entry, size_t block_bytes, std::string where, std::string index_file);

  /// A new read from the shard's start: what an earlier read had checked is kept.
  void start_over();
  /// The next bytes, in order. False when a check failed (problem() says which).
  bool arrive(const uint8_t* data, size_t size);
  /// Every byte has arrived: checks the size, the last block and the samples. False when a
  /// check failed; otherwise every sample is available.
  bool finish();
  /// Why the last arrive() or finish() returned false.
  std::exception_ptr problem() const { return problem_; }
  /// The shard cannot be read: every wait for a sample not yet available throws `error`.
  void fail(std::exception_ptr error);

  /// Sample `n`'s members, once its bytes have arrived and passed their checks; throws the
  /// shard's failure when they never will.
  SampleMembers sample(size_t n) const;
  /// The shard's bytes: a sample's members point into them.
  const uint8_t* bytes() const { return bytes_.get(); }

 private:
  bool refuse(const std::string& why);
  bool check_and_list(size_t checkable, bool whole);

  ShardEntry entry_;
  size_t block_bytes_;
  std::string where_, index_file_;
  std::unique_ptr<uint8_t[]> bytes_;  // entry_.bytes of them, written before they are checked
  size_t received_ = 0;               // by the current read, maybe more than entry_.bytes
  std::exception_ptr problem_;
  TarLister lister_;
  SampleGrouper grouper_;
  size_t samples_seen_ = 0;  // by the grouper

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  size_t checked_ = 0;                  // bytes that passed their check; only grows
  std::vector<SampleMembers> samples_;  // whose bytes are all checked
  bool complete_ = false;
  std::exception_ptr failure_;
};

}  // namespace lockstep::data
