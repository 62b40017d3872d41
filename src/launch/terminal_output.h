#pragma once

#include <string>

namespace lockstep::launch {

/// The launcher's own output, shared by every worker's forwarded lines and the launcher's
/// reports, with at most one progress bar at the bottom of `bar_fd` (a terminal). Lines are
/// written above the bar: it is lifted off ("\r\033[K"), the line written, and the bar drawn
/// again, so bar and lines never mix within one line. Without bar updates it just writes lines.
class TerminalOutput {
 public:
  explicit TerminalOutput(int bar_fd);

  /// Writes one whole line (ending in '\n') to `fd`, above the bar if one is shown.
  void write_line(int fd, const std::string& line);
  /// Draws `text` (one line, no '\r' or '\n') in place of the bar shown so far.
  void update_bar(const std::string& text);
  /// Leaves the bar on screen as an ordinary line; the next bar starts below it.
  void end_bar();
  bool bar_shown() const { return !bar_.empty(); }

 private:
  int bar_fd_;
  std::string bar_;  // as drawn now; empty when no bar is shown
};

}  // namespace lockstep::launch
