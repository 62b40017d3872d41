#pragma once

#include <cstddef>
#include <string>

#include "launch/terminal_output.h"

namespace lockstep::launch {

/// Copies one worker stream to `destination_fd` through `terminal` a whole line at a time,
/// each line led by `prefix` (e.g. "[rank 2] "), so lines from different workers never
/// interleave mid-line. With `bar_updates` (rank 0's stdout, on a terminal), a segment ending
/// in '\r' is a progress bar update: it replaces the terminal's bar, unprefixed, and an empty
/// line after it leaves the bar on screen as a line.
class PrefixedLines {
 public:
  PrefixedLines(std::string prefix, TerminalOutput& terminal, int destination_fd, bool bar_updates = false);

  /// Writes every line (or bar update) `data` completes; keeps the unfinished rest for later.
  void append(const char* data, std::size_t size);
  /// Ends a bar and writes an unfinished last line, ending it with a newline (the stream has closed).
  void flush();

 private:
  void write_pending();
  void write_segment(const std::string& segment);

  std::string prefix_;
  TerminalOutput& terminal_;
  int destination_fd_;
  bool bar_updates_;
  std::string pending_;
};

/// Reads everything `fd` (non-blocking) holds into `lines`. Returns false once the writer
/// has closed it (end of file), true while more may come.
bool forward_available(int fd, PrefixedLines& lines);

}  // namespace lockstep::launch
