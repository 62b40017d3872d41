#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "support/world.h"

namespace lockstep::testing {

/// Runs `argv` as from an interactive shell: a new pseudo-terminal is its stdin, stdout and
/// stderr, and the environment is the test's without launcher variables (as run_process's).
/// The terminal's output processing is off ("\n" is not turned into "\r\n"), so every '\r'
/// in `output` is one the program wrote. Reads until every process holding the terminal has
/// closed it; past `deadline` it kills the program and reports exit code -1.
Finished run_in_terminal(const std::vector<std::string>& argv,
                         std::chrono::seconds deadline = std::chrono::seconds(120));

}  // namespace lockstep::testing
