#pragma once

// POSIX ustar archives, the container of WebDataset-style shards. Written here because no
// library among lockstep's dependencies reads or writes tar (libarchive is not one of
// them), and the part shards need is 512-byte headers in front of padded file data.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::data {

/// A regular file inside an archive: its path and where its bytes sit in the archive.
struct TarMember {
  std::string name;
  size_t offset = 0;
  size_t size = 0;
};

/// Appends one regular file to `archive` (header, data, padding), with mode 0644 and
/// time 0 so that packing the same data twice gives the same bytes. Names over 100
/// bytes throw DataError.
void append_tar_member(std::vector<uint8_t>& archive, const std::string& name, const uint8_t* data, size_t size);

/// Ends an archive (two zero blocks).
void finish_tar(std::vector<uint8_t>& archive);

/// An archive's regular files read one at a time, as its bytes arrive: for a shard used
/// before the whole of it has been downloaded.
class TarLister {
 public:
  explicit TarLister(std::string source);
  /// The next regular file whose header and data lie within archive[0, available), or
  /// nullopt when more bytes are needed or the archive has ended (ended()). With `whole`,
  /// `available` is all there is: a member or end cut short throws DataError. A bad header
  /// checksum throws DataError naming `source` and the member before it.
  std::optional<TarMember> next(const uint8_t* archive, size_t available, bool whole);
  bool ended() const { return ended_; }

 private:
  std::string source_;
  std::string previous_;  // "member 'NAME'", for messages
  size_t at_ = 0;         // the next header
  bool ended_ = false;
};

/// The regular files of an archive, in order; other entries (folders, extended headers)
/// are passed over. A bad header checksum or a member cut short throws DataError naming
/// `source` and the member.
std::vector<TarMember> list_tar(const uint8_t* archive, size_t size, const std::string& source);

}  // namespace lockstep::data
