#include "job/process_sockets.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>

namespace lockstep {
namespace {

// Calls `visit(fd, inode)` for each socket open in this process, on a duplicate of its
// descriptor: the socket cannot change under it, even if its own descriptor is closed and
// its number reused meanwhile.
void for_each_socket(const std::function<void(int fd, ino_t inode)>& visit) {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return;
  const int own = dirfd(fds);
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    const int copy = fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 0);
    if (copy < 0) continue;
    struct stat info {};
    if (fstat(copy, &info) == 0 && S_ISSOCK(info.st_mode)) visit(copy, info.st_ino);
    close(copy);
  }
  closedir(fds);
}

void set(int fd, int level, int option, int value) { setsockopt(fd, level, option, &value, sizeof(value)); }

}  // namespace

std::set<ino_t> process_sockets() {
  std::set<ino_t> sockets;
  for_each_socket([&](int, ino_t inode) { sockets.insert(inode); });
  return sockets;
}

std::set<ino_t> opened_since(const std::set<ino_t>& before) {
  std::set<ino_t> opened;
  for (ino_t socket : process_sockets()) {
    if (before.count(socket) == 0) opened.insert(socket);
  }
  return opened;
}

void shut_down(const std::set<ino_t>& sockets) {
  for_each_socket([&](int fd, ino_t inode) {
    if (sockets.count(inode) != 0) ::shutdown(fd, SHUT_RDWR);
  });
}

// Options a socket that is not TCP refuses, harmlessly.
void fail_when_silent(const std::set<ino_t>& sockets, std::chrono::seconds silence) {
  const int seconds = static_cast<int>(silence.count());
  for_each_socket([&](int fd, ino_t inode) {
    if (sockets.count(inode) == 0) return;
    set(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, seconds * 1000);
  });
}

}  // namespace lockstep
