#pragma once

#include <CLI/CLI.hpp>

#include "action.h"

namespace lockstep::tools {

/// `lockstep datasets`: lists the registry's datasets and whether each can be read.
void add_datasets_command(CLI::App& app, Action& chosen);

/// `lockstep data export-imagenet-layout` (a dataset as JPEGs in ImageNet's layout) and
/// `lockstep data pack` (splits as tar shards with an index).
void add_data_command(CLI::App& app, Action& chosen);

}  // namespace lockstep::tools
