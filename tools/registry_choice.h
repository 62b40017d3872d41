#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "handed_flags.h"
#include "lockstep/data/registry.h"

namespace lockstep::tools {

// Which dataset registry a command reads and which paths it replaces: the same two options
// on every command that names datasets.
struct RegistryChoice {
  std::string file;                         // --data-toml; empty: $LOCKSTEP_DATA_TOML or the built-in one
  std::vector<std::string> path_overrides;  // --data-path NAME=DIR, or DIR for the chosen dataset

  void add_to(CLI::App& command);
  // The registry, with $LOCKSTEP_DATA_PATH_<NAME> and then --data-path applied; a DIR with
  // no NAME= is `chosen`'s path (a command that names no one dataset passes "").
  data::Registry load(const std::string& chosen) const;
  // The same choice as flags, for workers started with it.
  std::vector<std::string> as_arguments() const;
  // The same choice as a settings file's keys (data_toml, data_path), those that are set.
  std::vector<NamedSetting> values() const;
};

}  // namespace lockstep::tools
