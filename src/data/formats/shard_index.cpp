#include "data/formats/shard_index.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

const char kFormat[] = "lockstep shards 1";

std::string hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

}  // namespace

size_t ShardIndex::samples() const {
  size_t total = 0;
  for (const auto& shard : shards) total += shard.samples;
  return total;
}

std::string index_file_name(const std::string& split) { return split + ".index.json"; }

std::string index_to_json(const ShardIndex& index) {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& shard : index.shards) {
    std::vector<std::string> blocks;
    for (const uint32_t crc : shard.block_crc32) blocks.push_back(hex(crc));
    shards.push_back({{"name", shard.name},
                      {"samples", shard.samples},
                      {"bytes", shard.bytes},
                      {"crc32", hex(shard.crc32)},
                      {"block_crc32", blocks}});
  }
  const nlohmann::json document = {{"format", kFormat},
                                   {"split", index.split},
                                   {"channels", index.channels},
                                   {"classes", index.classes},
                                   {"class_names", index.class_names},
                                   {"block_bytes", index.block_bytes},
                                   {"shards", shards}};
  return document.dump(1) + "\n";
}

ShardIndex index_from_json(const std::string& text, const std::string& source) {
  const auto refuse = [&](const std::string& why) {
    return DataError(source + " is not a lockstep shard index: " + why);
  };
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object()) throw refuse("not a JSON object");
  if (document.value("format", "") != kFormat) throw refuse("its format is not \"" + std::string(kFormat) + "\"");
  ShardIndex index;
  try {
    index.split = document.at("split").get<std::string>();
    index.channels = document.at("channels").get<int>();
    index.classes = document.at("classes").get<int64_t>();
    index.class_names = document.value("class_names", std::vector<std::string>{});
    index.block_bytes = document.value("block_bytes", size_t{0});
    const auto crc_of = [](const nlohmann::json& text) {
      return static_cast<uint32_t>(std::stoul(text.get<std::string>(), nullptr, 16));
    };
    for (const auto& shard : document.at("shards")) {
      ShardEntry entry{shard.at("name").get<std::string>(), shard.at("samples").get<size_t>(),
                       shard.at("bytes").get<size_t>(), crc_of(shard.at("crc32"))};
      for (const auto& crc : shard.value("block_crc32", nlohmann::json::array()))
        entry.block_crc32.push_back(crc_of(crc));
      index.shards.push_back(std::move(entry));
    }
  } catch (const std::exception& error) {
    throw refuse(error.what());
  }
  if (index.channels != 1 && index.channels != 3) throw refuse("channels " + std::to_string(index.channels));
  if (index.classes < 1) throw refuse("classes " + std::to_string(index.classes));
  if (index.shards.empty()) throw refuse("it lists no shards");
  for (const auto& shard : index.shards) {
    if (shard.samples == 0) throw refuse("shard " + shard.name + " has no samples");
    if (shard.name.empty() || shard.name.find('/') != std::string::npos || shard.name[0] == '.') {
      throw refuse("shard name '" + shard.name + "' is not a file name beside the index");
    }
    const size_t blocks = index.block_bytes == 0 ? 0 : (shard.bytes + index.block_bytes - 1) / index.block_bytes;
    if (!shard.block_crc32.empty() && shard.block_crc32.size() != blocks) {
      throw refuse("shard " + shard.name + " has " + std::to_string(shard.block_crc32.size()) +
                   " block checksums, not the " + std::to_string(blocks) + " its " + std::to_string(shard.bytes) +
                   " bytes make in blocks of " + std::to_string(index.block_bytes));
    }
  }
  return index;
}

ShardEntry shard_entry(const std::string& name, size_t samples, const uint8_t* bytes, size_t size) {
  ShardEntry entry{name, samples, size, crc32_of(bytes, size)};
  for (size_t start = 0; start < size; start += kCheckBlockBytes) {
    entry.block_crc32.push_back(crc32_of(bytes + start, std::min(kCheckBlockBytes, size - start)));
  }
  return entry;
}

uint32_t crc32_of(const uint8_t* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib's length is a uInt: feed large buffers in pieces.
  for (size_t done = 0; done < size;) {
    const size_t piece = std::min<size_t>(size - done, 1u << 30);
    crc = crc32(crc, data + done, static_cast<uInt>(piece));
    done += piece;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace lockstep::data
