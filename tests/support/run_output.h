#pragma once

#include <string>
#include <vector>

namespace lockstep::testing {

/// Every "val loss ..." line of a `lockstep train` run's output, without the launcher's
/// rank prefix: what two runs that must end alike are compared by, to every digit.
inline std::vector<std::string> validation_lines(const std::string& output) {
  std::vector<std::string> lines;
  for (size_t at = output.find("val loss "); at != std::string::npos; at = output.find("val loss ", at + 1)) {
    lines.push_back(output.substr(at, output.find('\n', at) - at));
  }
  return lines;
}

}  // namespace lockstep::testing
