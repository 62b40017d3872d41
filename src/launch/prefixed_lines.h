#pragma once

#include <cstddef>
#include <string>

namespace lockstep::launch {

/// Copies one worker stream to `destination_fd` a whole line at a time, each line led by
/// `prefix` (e.g. "[rank 2] "), so lines from different workers never interleave mid-line.
class PrefixedLines {
 public:
  PrefixedLines(std::string prefix, int destination_fd);

  /// Writes every line `data` completes; keeps the unfinished rest for later.
  void append(const char* data, std::size_t size);
  /// Writes an unfinished last line, ending it with a newline (the stream has closed).
  void flush();

 private:
  void write_line(std::size_t start, std::size_t end);

  std::string prefix_;
  int destination_fd_;
  std::string pending_;
};

/// Reads everything `fd` (non-blocking) holds into `lines`. Returns false once the writer
/// has closed it (end of file), true while more may come.
bool forward_available(int fd, PrefixedLines& lines);

}  // namespace lockstep::launch
