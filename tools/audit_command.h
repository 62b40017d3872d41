#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep data audit RUN`: whether a run's sample log (lockstep train --sample-log) trained
/// every sample once per epoch; exits 1 naming the first sample missing or repeated.
void add_audit_command(CLI::App& data, Action& chosen);

}  // namespace lockstep::tools
