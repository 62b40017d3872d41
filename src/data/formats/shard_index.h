#pragma once

// A split's index: its shards with their sample counts, sizes and checksums, written by
// `lockstep data pack` as <split>.index.json beside the shards, so that a reader knows every
// size before it reads a shard and can tell a changed or truncated shard from a good one.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::data {

struct ShardEntry {
  std::string name;  // file name, relative to the index
  size_t samples = 0;
  size_t bytes = 0;
  uint32_t crc32 = 0;  // zlib's CRC-32 of the whole file: catches corruption, not tampering
  /// The CRC-32 of each ShardIndex::block_bytes of the file, so that a reader can check and
  /// use a shard's start while the rest downloads. Empty in indexes written before them.
  std::vector<uint32_t> block_crc32;
};

/// What the index says of a shard's `bytes`, checksums included.
ShardEntry shard_entry(const std::string& name, size_t samples, const uint8_t* bytes, size_t size);

/// The size of the blocks that shard_entry() checksums one by one: small enough that a
/// shard's first samples are used soon after its download starts, large enough that a
/// split of many GB keeps a small index.
constexpr size_t kCheckBlockBytes = 1 << 20;

struct ShardIndex {
  std::string split;
  int channels = 0;  // what the images decode to
  int64_t classes = 0;
  std::vector<std::string> class_names;  // empty when the packed dataset had none
  std::vector<ShardEntry> shards;
  size_t block_bytes = kCheckBlockBytes;  // of ShardEntry::block_crc32

  size_t samples() const;
};

/// "<split>.index.json".
std::string index_file_name(const std::string& split);

std::string index_to_json(const ShardIndex& index);
/// Reads an index; anything missing or malformed throws DataError naming `source`.
ShardIndex index_from_json(const std::string& text, const std::string& source);

uint32_t crc32_of(const uint8_t* data, size_t size);

}  // namespace lockstep::data
