#include "data/formats/tar_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

constexpr size_t kBlock = 512;

// Field offsets and widths of a ustar header.
constexpr size_t kName = 0, kNameWidth = 100;
constexpr size_t kMode = 100, kUid = 108, kGid = 116;
constexpr size_t kSize = 124, kSizeWidth = 12;
constexpr size_t kTime = 136;
constexpr size_t kChecksum = 148, kChecksumWidth = 8;
constexpr size_t kType = 156;
constexpr size_t kMagicOffset = 257;
constexpr size_t kPrefix = 345, kPrefixWidth = 155;

size_t padded(size_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

void put_octal(uint8_t* field, size_t width, uint64_t value) {
  // width - 1 digits and a NUL, as tar writes them.
  std::snprintf(reinterpret_cast<char*>(field), width, "%0*llo", static_cast<int>(width - 1),
                static_cast<unsigned long long>(value));
}

uint64_t header_sum(const uint8_t* header) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    sum += (i >= kChecksum && i < kChecksum + kChecksumWidth) ? uint8_t{' '} : header[i];
  }
  return sum;
}

// An octal field: digits, ended by NUL or space, possibly led by spaces.
bool read_octal(const uint8_t* field, size_t width, uint64_t& value) {
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  value = 0;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  return any && (i == width || field[i] == '\0' || field[i] == ' ');
}

std::string text_field(const uint8_t* field, size_t width) {
  const auto* begin = reinterpret_cast<const char*>(field);
  return std::string(begin, strnlen(begin, width));
}

bool all_zero(const uint8_t* block) {
  return std::all_of(block, block + kBlock, [](uint8_t byte) { return byte == 0; });
}

}  // namespace

void append_tar_member(std::vector<uint8_t>& archive, const std::string& name, const uint8_t* data, size_t size) {
  if (name.empty() || name.size() >= kNameWidth) {
    throw DataError("tar member name '" + name + "' must have 1 to 99 bytes");
  }
  const size_t start = archive.size();
  archive.resize(start + kBlock + padded(size), 0);
  uint8_t* header = archive.data() + start;
  std::memcpy(header + kName, name.data(), name.size());
  put_octal(header + kMode, 8, 0644);
  put_octal(header + kUid, 8, 0);
  put_octal(header + kGid, 8, 0);
  put_octal(header + kSize, kSizeWidth, size);
  put_octal(header + kTime, 12, 0);
  header[kType] = '0';
  std::memcpy(header + kMagicOffset,
              "ustar\0"
              "00",
              8);
  // The checksum: six octal digits, a NUL and a space.
  std::snprintf(reinterpret_cast<char*>(header + kChecksum), 7, "%06llo",
                static_cast<unsigned long long>(header_sum(header)));
  header[kChecksum + 7] = ' ';
  if (size > 0) std::memcpy(header + kBlock, data, size);
}

void finish_tar(std::vector<uint8_t>& archive) { archive.resize(archive.size() + 2 * kBlock, 0); }

TarLister::TarLister(std::string source) : source_(std::move(source)), previous_("its start") {}

std::optional<TarMember> TarLister::next(const uint8_t* archive, size_t available, bool whole) {
  while (!ended_) {
    if (at_ + kBlock > available) {
      if (!whole) return std::nullopt;
      throw DataError(source_ + " is cut short after " + previous_ + " (" + std::to_string(available) +
                      " bytes, no end-of-archive blocks): a truncated shard");
    }
    const uint8_t* header = archive + at_;
    if (all_zero(header)) {
      ended_ = true;
      break;
    }
    std::string name = text_field(header + kName, kNameWidth);
    const std::string prefix = text_field(header + kPrefix, kPrefixWidth);
    if (!prefix.empty() && std::memcmp(header + kMagicOffset, "ustar", 5) == 0) name = prefix + "/" + name;
    uint64_t stored_sum = 0, length = 0;
    if (!read_octal(header + kChecksum, kChecksumWidth, stored_sum) || stored_sum != header_sum(header)) {
      throw DataError(source_ + ": the tar header after " + previous_ + " is corrupt (bad checksum) at byte " +
                      std::to_string(at_));
    }
    if (!read_octal(header + kSize, kSizeWidth, length)) {
      throw DataError(source_ + ": member '" + name + "' has an unreadable size");
    }
    const size_t data = at_ + kBlock;
    if (length > available - data) {
      if (!whole) return std::nullopt;
      throw DataError(source_ + ": member '" + name + "' is cut short (" + std::to_string(available - data) + " of " +
                      std::to_string(length) + " bytes): a truncated shard");
    }
    const char type = static_cast<char>(header[kType]);
    previous_ = "member '" + name + "'";
    at_ = data + padded(static_cast<size_t>(length));
    if (type == '0' || type == '\0') return TarMember{name, data, static_cast<size_t>(length)};
  }
  return std::nullopt;
}

std::vector<TarMember> list_tar(const uint8_t* archive, size_t size, const std::string& source) {
  TarLister lister(source);
  std::vector<TarMember> members;
  while (auto member = lister.next(archive, size, true)) members.push_back(std::move(*member));
  return members;
}

}  // namespace lockstep::data
