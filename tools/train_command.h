#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep train`: the main job. Started on its own it launches its workers as
/// `lockstep run` does; started inside a launch (lockstep run, mpirun, torchrun) it is one.
void add_train_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
