#pragma once

#include <string>

// c10d's TCPStore logs every failed bind or connect as it goes, then throws an error that
// repeats them all: lockstep reports that error once, in one line that says what to fix.
namespace lockstep {

/// While it lives, c10d's own log lines stay off the user's terminal (c10's log level
/// gates them). For the construction of a TCPStore, on one thread at a time.
class QuietC10dLogs {
 public:
  QuietC10dLogs();
  ~QuietC10dLogs();
  QuietC10dLogs(const QuietC10dLogs&) = delete;
  QuietC10dLogs& operator=(const QuietC10dLogs&) = delete;

 private:
  int saved_level_;
};

/// The first reason in a c10d socket error ("... (errno: 98 - Address already in use)"
/// gives "Address already in use"), or else its first line.
std::string c10d_reason(const std::string& message);

}  // namespace lockstep
