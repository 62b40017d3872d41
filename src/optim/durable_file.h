#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/serialize/archive.h>

// Files a crash at any moment leaves either whole or absent: checkpoints and their shards,
// in a local folder or under an s3://BUCKET/PREFIX. Each function takes either; an object
// is written with one PUT, which S3 makes visible whole or not at all.
namespace lockstep::optim {

/// Writes `archive` to `path`: locally to a temporary file beside it, flushed to disk and
/// renamed (durable once the folder is synced, sync_folder); in S3 with one PUT.
void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::string& path);

/// Writes `text` to `path` whole or not at all, as save_archive_atomically does.
void save_text_atomically(const std::string& text, const std::string& path);

/// The text of `path`, or nothing when there is no such file or object; DataError naming it
/// when it cannot be read.
std::optional<std::string> read_text(const std::string& path);

/// Flushes a local folder's entries (the renames into it) to disk; nothing in S3.
void sync_folder(const std::string& folder);

/// Reads `path` into `archive`, its tensors onto the CPU. False when there is no such file
/// or object; DataError naming it when it cannot be read; c10::Error from `archive` when
/// it is not an archive.
bool load_archive(torch::serialize::InputArchive& archive, const std::string& path);

/// The names of the files directly in `folder` (S3: the keys one level under the prefix).
std::vector<std::string> names_in_folder(const std::string& folder);

/// Removes a file or object; nothing when it is not there.
void remove_file(const std::string& path);

/// Creates a local folder and its parents; nothing in S3, which has no folders.
void make_folder(const std::string& folder);

}  // namespace lockstep::optim
