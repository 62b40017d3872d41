#include "launch/prefixed_lines.h"

#include <unistd.h>

#include <cerrno>

namespace lockstep::launch {
namespace {

// A stream that never ends a line (a progress bar) is still shown once it grows this long.
constexpr std::size_t kLongestHeldLine = 64 * 1024;

void write_all(int fd, const std::string& text) {
  std::size_t written = 0;
  while (written < text.size()) {
    ssize_t result = write(fd, text.data() + written, text.size() - written);
    if (result < 0 && errno == EINTR) {
      continue;
    }
    if (result <= 0) {
      return;  // the launcher's own output is gone; nothing useful to do with the line
    }
    written += static_cast<std::size_t>(result);
  }
}

}  // namespace

PrefixedLines::PrefixedLines(std::string prefix, int destination_fd)
    : prefix_(std::move(prefix)), destination_fd_(destination_fd) {}

void PrefixedLines::append(const char* data, std::size_t size) {
  pending_.append(data, size);
  std::size_t line_start = 0;
  std::size_t newline;
  while ((newline = pending_.find('\n', line_start)) != std::string::npos) {
    write_line(line_start, newline + 1);
    line_start = newline + 1;
  }
  pending_.erase(0, line_start);
  if (pending_.size() >= kLongestHeldLine) {
    flush();
  }
}

void PrefixedLines::flush() {
  if (!pending_.empty()) {
    pending_ += '\n';
    write_line(0, pending_.size());
    pending_.clear();
  }
}

void PrefixedLines::write_line(std::size_t start, std::size_t end) {
  // One write per line keeps it whole even when other processes share the destination.
  write_all(destination_fd_, prefix_ + pending_.substr(start, end - start));
}

bool forward_available(int fd, PrefixedLines& lines) {
  char buffer[16 * 1024];
  while (true) {
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got > 0) {
      lines.append(buffer, static_cast<std::size_t>(got));
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      return false;  // end of file, or an error that ends the stream just the same
    }
  }
}

}  // namespace lockstep::launch
