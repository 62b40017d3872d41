#pragma once

#include <fstream>
#include <string>

namespace lockstep::train {

// A run's sample log (RUN/samples.log) without its "#" lines, which say where the run
// resumed: what two runs trained, step by step, as text to compare.
inline std::string trained_steps(const std::string& run) {
  std::ifstream in(run + "/samples.log");
  std::string steps, line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '#') steps += line + "\n";
  }
  return steps;
}

}  // namespace lockstep::train
