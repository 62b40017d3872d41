#include "launch/terminal_output.h"

#include <unistd.h>

#include <cerrno>

namespace lockstep::launch {
namespace {

// Back to the line's start, then erase it: wipes a bar of any length.
constexpr const char* kClearLine = "\r\033[K";

void write_all(int fd, const std::string& text) {
  std::size_t written = 0;
  while (written < text.size()) {
    ssize_t result = write(fd, text.data() + written, text.size() - written);
    if (result < 0 && errno == EINTR) {
      continue;
    }
    if (result <= 0) {
      return;  // the launcher's own output is gone; nothing useful to do with the text
    }
    written += static_cast<std::size_t>(result);
  }
}

}  // namespace

TerminalOutput::TerminalOutput(int bar_fd) : bar_fd_(bar_fd) {}

void TerminalOutput::write_line(int fd, const std::string& line) {
  if (!bar_shown()) {
    write_all(fd, line);
  } else if (fd == bar_fd_) {
    // One write for all three keeps the line whole even when other processes share the terminal.
    write_all(fd, kClearLine + line + bar_ + "\r");
  } else {
    write_all(bar_fd_, kClearLine);
    write_all(fd, line);
    write_all(bar_fd_, bar_ + "\r");
  }
}

void TerminalOutput::update_bar(const std::string& text) {
  // The padding that wipes a longer bar on a bare terminal is not needed after kClearLine,
  // and would wrap a bar that only just fits.
  bar_ = text.substr(0, text.find_last_not_of(' ') + 1);
  // Ending with "\r", as the worker does: the cursor waits at the line's start for what comes next.
  write_all(bar_fd_, kClearLine + bar_ + "\r");
}

void TerminalOutput::end_bar() {
  if (!bar_shown()) return;
  write_all(bar_fd_, "\n");
  bar_.clear();
}

}  // namespace lockstep::launch
