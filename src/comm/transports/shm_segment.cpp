#include "comm/transports/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "lockstep/error.h"

namespace lockstep {
namespace {

constexpr char kPrefix[] = "lockstep-";

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

const char* kHowToTurnOff =
    "; give the container more shared memory (docker run --shm-size) or set LOCKSTEP_SHM=0 to "
    "use gloo or MPI between local ranks";

void* map(int fd, size_t bytes) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return data == MAP_FAILED ? nullptr : data;
}

bool process_exists(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

ShmSegment::ShmSegment(std::string name, void* data, size_t bytes, bool owns_name)
    : name_(std::move(name)), data_(data), bytes_(bytes), owns_name_(owns_name) {}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), bytes_(other.bytes_), owns_name_(other.owns_name_) {
  other.data_ = nullptr;
  other.owns_name_ = false;
}

ShmSegment::~ShmSegment() {
  unlink();
  if (data_ != nullptr) munmap(data_, bytes_);
}

void ShmSegment::unlink() {
  if (owns_name_) shm_unlink(name_.c_str());
  owns_name_ = false;
}

ShmSegment ShmSegment::create(size_t bytes) {
  std::random_device random;
  const uint64_t nonce = (static_cast<uint64_t>(random()) << 32) ^ random();
  const std::string name = "/" + std::string(kPrefix) + std::to_string(getpid()) + "-" + std::to_string(nonce);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw Error(system_error("lockstep: cannot create /dev/shm" + name) + kHowToTurnOff);
  // Reserving the pages now turns a full /dev/shm into this error instead of a SIGBUS later.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  void* data = reserved == 0 ? map(fd, bytes) : nullptr;
  const int error = reserved != 0 ? reserved : errno;
  close(fd);
  if (data == nullptr) {
    shm_unlink(name.c_str());
    errno = error;
    throw Error(
        system_error("lockstep: cannot reserve " + std::to_string(bytes >> 10) + " KiB of shared memory in /dev/shm") +
        kHowToTurnOff);
  }
  return ShmSegment(name, data, bytes, /*owns_name=*/true);
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw Error(system_error("lockstep: cannot open /dev/shm" + name));
  struct stat status {};
  void* data = fstat(fd, &status) == 0 && static_cast<size_t>(status.st_size) == bytes ? map(fd, bytes) : nullptr;
  close(fd);
  if (data == nullptr) throw Error("lockstep: cannot map /dev/shm" + name + " of " + std::to_string(bytes) + " bytes");
  return ShmSegment(name, data, bytes, /*owns_name=*/false);
}

void remove_abandoned_segments() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string file = entry.path().filename();
    if (file.rfind(kPrefix, 0) != 0) continue;
    const pid_t creator = static_cast<pid_t>(std::atol(file.c_str() + sizeof(kPrefix) - 1));
    if (creator > 0 && !process_exists(creator)) shm_unlink(("/" + file).c_str());
  }
}

}  // namespace lockstep

namespace lockstep {

size_t shm_free_bytes() {
  struct statvfs status {};
  if (statvfs("/dev/shm", &status) != 0) return 0;
  return static_cast<size_t>(status.f_bavail) * status.f_frsize;
}

}  // namespace lockstep
