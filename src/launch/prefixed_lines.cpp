#include "launch/prefixed_lines.h"

#include <unistd.h>

#include <cerrno>

namespace lockstep::launch {
namespace {

// A stream that never ends a line is still shown once it grows this long.
constexpr std::size_t kLongestHeldLine = 64 * 1024;

}  // namespace

PrefixedLines::PrefixedLines(std::string prefix, TerminalOutput& terminal, int destination_fd, bool bar_updates)
    : prefix_(std::move(prefix)), terminal_(terminal), destination_fd_(destination_fd), bar_updates_(bar_updates) {}

void PrefixedLines::append(const char* data, std::size_t size) {
  pending_.append(data, size);
  const char* ends = bar_updates_ ? "\n\r" : "\n";
  std::size_t start = 0;
  std::size_t end;
  while ((end = pending_.find_first_of(ends, start)) != std::string::npos) {
    write_segment(pending_.substr(start, end + 1 - start));
    start = end + 1;
  }
  pending_.erase(0, start);
  if (pending_.size() >= kLongestHeldLine) {
    write_pending();
  }
}

void PrefixedLines::flush() {
  if (bar_updates_) terminal_.end_bar();
  write_pending();
}

void PrefixedLines::write_pending() {
  if (!pending_.empty()) {
    write_segment(pending_ + '\n');
    pending_.clear();
  }
}

void PrefixedLines::write_segment(const std::string& segment) {
  if (bar_updates_ && segment.back() == '\r') {
    terminal_.update_bar(segment.substr(0, segment.size() - 1));
  } else if (bar_updates_ && segment == "\n" && terminal_.bar_shown()) {
    terminal_.end_bar();  // the worker ended its bar with a newline: it stays as that epoch's summary
  } else {
    terminal_.write_line(destination_fd_, prefix_ + segment);
  }
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
