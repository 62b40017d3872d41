#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace lockstep {

/// A shared-memory segment in /dev/shm, mapped into every local rank of one group.
///
/// Its name lives only while ranks attach: the creator unlinks it as soon as everyone has
/// mapped it, so nothing is left in /dev/shm after start-up, whatever happens to the job
/// later (the memory goes when the last rank unmaps it or dies). Names carry the creator's
/// pid, so a segment left by a job killed during start-up is removed by the next one and
/// can never be mistaken for its own.
class ShmSegment {
 public:
  /// Makes a new segment of `bytes` zeroed bytes under a fresh name.
  static ShmSegment create(size_t bytes);
  /// Maps the segment another rank created.
  static ShmSegment open(const std::string& name, size_t bytes);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) = delete;
  ShmSegment(const ShmSegment&) = delete;
  ~ShmSegment();

  const std::string& name() const { return name_; }
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  /// Removes the name (the creator calls this once every rank has attached).
  void unlink();

 private:
  ShmSegment(std::string name, void* data, size_t bytes, bool owns_name);

  std::string name_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owns_name_ = false;
};

/// Removes segments of lockstep jobs whose creating process no longer exists.
void remove_abandoned_segments();

/// Bytes /dev/shm has free (the most a segment could take now).
size_t shm_free_bytes();

}  // namespace lockstep
