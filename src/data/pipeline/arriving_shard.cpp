#include "data/pipeline/arriving_shard.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

// "000123.cls" -> {"000123", "cls"}: the key up to the first dot of the file name, and the
// rest, in lower case, its kind.
std::pair<std::string, std::string> key_and_kind(const std::string& name) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  std::string kind = name.substr(dot + 1);
  std::transform(kind.begin(), kind.end(), kind.begin(), [](unsigned char c) { return std::tolower(c); });
  return {name.substr(0, dot), kind};
}

}  // namespace

std::optional<SampleMembers> SampleGrouper::add(const TarMember& member) {
  const auto [key, kind] = key_and_kind(member.name);
  std::optional<SampleMembers> closed;
  if (open_ && open_->key != key) closed = close();
  if (!open_) {
    open_ = SampleMembers{key, {}, "", {}};
    open_has_label_ = false;
  }
  if (kind == "jpg" || kind == "jpeg" || kind == "npy") {
    open_->image = member;
    open_->image_kind = kind == "npy" ? "npy" : "jpg";
  } else if (kind == "cls") {
    open_->label = member;
    open_has_label_ = true;
  } else if (kind == "png") {
    throw DataError(shard_ + " member " + member.name +
                    ": PNG is not read (none of lockstep's dependencies decodes it); pack images as JPEG or .npy");
  }
  return closed;
}

std::optional<SampleMembers> SampleGrouper::finish() {
  if (!open_) return std::nullopt;
  return close();
}

SampleMembers SampleGrouper::close() {
  SampleMembers sample = std::move(*open_);
  open_.reset();
  if (sample.image_kind.empty()) throw DataError(shard_ + " sample " + sample.key + " has no .jpg or .npy member");
  if (!open_has_label_) throw DataError(shard_ + " sample " + sample.key + " has no .cls member");
  return sample;
}

std::vector<SampleMembers> group_samples(const std::vector<TarMember>& members, const std::string& shard) {
  SampleGrouper grouper(shard);
  std::vector<SampleMembers> samples;
  for (const TarMember& member : members) {
    if (auto closed = grouper.add(member)) samples.push_back(std::move(*closed));
  }
  if (auto last = grouper.finish()) samples.push_back(std::move(*last));
  return samples;
}

ArrivingShard::ArrivingShard(ShardEntry entry, size_t block_bytes, std::string where, std::string index_file)
    : entry_(std::move(entry)),
      block_bytes_(entry_.block_crc32.empty() ? 0 : block_bytes),
      where_(std::move(where)),
      index_file_(std::move(index_file)),
      bytes_(new uint8_t[std::max<size_t>(entry_.bytes, 1)]),
      lister_(where_),
      grouper_(where_) {}

void ArrivingShard::start_over() {
  received_ = 0;
  problem_ = nullptr;
}

bool ArrivingShard::arrive(const uint8_t* data, size_t size) {
  // Bytes past the index's count are counted, not kept: finish() names the size. Those an
  // earlier read checked are not written again, as samples may be decoded from them now.
  const size_t from = std::max(received_, checked_), to = std::min(received_ + size, entry_.bytes);
  if (to > from) std::memcpy(bytes_.get() + from, data + (from - received_), to - from);
  received_ += size;
  // The last block waits for finish(), so that a shard that grew is named by its size.
  return block_bytes_ == 0 || entry_.bytes == 0 || check_and_list(std::min(received_, entry_.bytes - 1), false);
}

bool ArrivingShard::finish() {
  if (received_ != entry_.bytes) {
    return refuse(where_ + " has " + std::to_string(received_) + " bytes, but " + index_file_ + " says " +
                  std::to_string(entry_.bytes) + ": the shard was cut short or changed since it was packed");
  }
  if (block_bytes_ == 0 && crc32_of(bytes_.get(), entry_.bytes) != entry_.crc32) {
    return refuse(where_ + " does not match its checksum in " + index_file_ +
                  ": the shard is corrupt or changed since it was packed");
  }
  if (!check_and_list(entry_.bytes, true)) return false;
  if (samples_seen_ != entry_.samples) {
    return refuse(where_ + " holds " + std::to_string(samples_seen_) + " samples, but " + index_file_ + " says " +
                  std::to_string(entry_.samples));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    complete_ = true;
  }
  changed_.notify_all();
  return true;
}

// Checks the whole blocks within the first `checkable` bytes (all of them, `whole`), lists
// the samples they complete, and makes those available.
bool ArrivingShard::check_and_list(size_t checkable, bool whole) {
  size_t checked = checked_;  // only this thread writes it
  bool corrupt = false;
  if (block_bytes_ == 0) {
    checked = checkable;  // finish() checked the whole shard
  } else {
    while (checked < checkable && !corrupt) {
      const size_t end = std::min(checked + block_bytes_, entry_.bytes);
      if (end > checkable) break;
      if (crc32_of(bytes_.get() + checked, end - checked) != entry_.block_crc32[checked / block_bytes_]) {
        refuse(where_ + " does not match its checksum in " + index_file_ +
               ": the shard is corrupt or changed since it was packed (bytes " + std::to_string(checked) + " to " +
               std::to_string(end) + ")");
        corrupt = true;
      } else {
        checked = end;
      }
    }
  }
  // The blocks before a corrupt one are good: their samples are given out all the same.
  if (checked == checked_ && !whole) return !corrupt;
  whole = whole && !corrupt;
  std::vector<SampleMembers> listed;
  try {
    while (auto member = lister_.next(bytes_.get(), checked, whole)) {
      if (auto sample = grouper_.add(*member)) listed.push_back(std::move(*sample));
    }
    if (whole) {
      if (auto last = grouper_.finish()) listed.push_back(std::move(*last));
    }
  } catch (const DataError&) {
    problem_ = std::current_exception();
    return false;
  }
  samples_seen_ += listed.size();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    checked_ = checked;
    for (auto& sample : listed) samples_.push_back(std::move(sample));
  }
  changed_.notify_all();
  return !corrupt;
}

bool ArrivingShard::refuse(const std::string& why) {
  problem_ = std::make_exception_ptr(DataError(why));
  return false;
}

void ArrivingShard::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::move(error);
  }
  changed_.notify_all();
}

SampleMembers ArrivingShard::sample(size_t n) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return n < samples_.size() || complete_ || failure_; });
  if (n < samples_.size()) return samples_[n];
  if (failure_) std::rethrow_exception(failure_);
  throw DataError(where_ + " holds no sample #" + std::to_string(n));
}

}  // namespace lockstep::data
