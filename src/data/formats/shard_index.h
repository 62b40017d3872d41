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
};

struct ShardIndex {
  std::string split;
  int channels = 0;  // what the images decode to
  int64_t classes = 0;
  std::vector<std::string> class_names;  // empty when the packed dataset had none
  std::vector<ShardEntry> shards;

  size_t samples() const;
};

/// "<split>.index.json".
std::string index_file_name(const std::string& split);

std::string index_to_json(const ShardIndex& index);
/// Reads an index; anything missing or malformed throws DataError naming `source`.
ShardIndex index_from_json(const std::string& text, const std::string& source);

uint32_t crc32_of(const uint8_t* data, size_t size);

}  // namespace lockstep::data
