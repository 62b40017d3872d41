#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep export RUN_DIR --out FILE`: a run's trained weights for Python's torch.load,
/// or, for a TorchScript model, the scripted module with them (torch.jit.load).
void add_export_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
