#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep run`: starts a program as N workers per node, torchrun-style (src/launch).
void add_run_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
