#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

// `lockstep timeline merge OUT FILE...` and `lockstep timeline summary FILE [--json]`.
void add_timeline_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
