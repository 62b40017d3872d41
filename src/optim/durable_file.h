#pragma once

#include <string>

#include <torch/serialize/archive.h>

// Files a crash at any moment leaves either whole or absent: checkpoints and their shards.
namespace lockstep::optim {

/// Writes `archive` to a temporary file beside `path`, flushes it to disk and renames it to
/// `path`. The rename is durable once the folder is synced (sync_folder).
void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::string& path);

/// Flushes a folder's entries (the renames into it) to disk.
void sync_folder(const std::string& folder);

}  // namespace lockstep::optim
