#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep eval RUN`: loss, top-1 and top-5 of a run's newest (or a named) checkpoint over
/// a split, with the run's own settings (RUN/config.toml), on N workers.
void add_eval_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
