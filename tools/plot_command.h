#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep plot RUN_DIR`: loss and accuracy curves of a run as an SVG file.
void add_plot_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
