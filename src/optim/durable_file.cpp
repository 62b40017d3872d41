#include "optim/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "lockstep/error.h"

namespace lockstep::optim {
namespace {

void sync_to_disk(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw Error("cannot open " + path + " to flush it to disk");
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) throw Error("cannot flush " + path + " to disk (fsync failed)");
}

}  // namespace

void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::string& path) {
  const std::string temporary = path + ".tmp";
  try {
    archive.save_to(temporary);
  } catch (const c10::Error& e) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw Error("cannot write " + temporary + ": " + e.what_without_backtrace());
  }
  sync_to_disk(temporary, O_RDONLY);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw Error("cannot rename " + temporary + " to " + path);
}

void sync_folder(const std::string& folder) { sync_to_disk(folder, O_RDONLY | O_DIRECTORY); }

}  // namespace lockstep::optim
