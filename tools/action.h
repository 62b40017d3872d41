#pragma once

#include <functional>

namespace lockstep::tools {

/// What the chosen subcommand does, once the command line parsed: its exit status. Each
/// `add_*_command` sets it from its subcommand's callback; main runs it.
using Action = std::function<int()>;

}  // namespace lockstep::tools
