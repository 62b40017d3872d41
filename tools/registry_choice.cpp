#include "registry_choice.h"

#include "lockstep/error.h"

namespace lockstep::tools {

void RegistryChoice::add_to(CLI::App& command) {
  command.add_option("--data-toml", file, "Dataset registry (default: $LOCKSTEP_DATA_TOML or the built-in one)");
  command.add_option("--data-path", path_overrides,
                     "NAME=DIR: read dataset NAME from DIR instead (DIR alone: the chosen dataset)");
}

data::Registry RegistryChoice::load(const std::string& chosen) const {
  data::Registry registry = file.empty() ? data::Registry::load_default() : data::Registry::load(file);
  if (!file.empty()) registry.apply_environment();  // load_default() has applied it
  for (const auto& item : path_overrides) {
    const auto equals = item.find('=');
    if (equals == std::string::npos && !chosen.empty() && !item.empty()) {
      registry.override_path(chosen, item);
      continue;
    }
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size()) {
      throw ConfigError("--data-path wants NAME=DIR" + std::string(chosen.empty() ? "" : " or DIR") + ", got '" + item +
                        "'");
    }
    registry.override_path(item.substr(0, equals), item.substr(equals + 1));
  }
  return registry;
}

std::vector<std::string> RegistryChoice::as_arguments() const {
  std::vector<std::string> arguments;
  if (!file.empty()) arguments.insert(arguments.end(), {"--data-toml", file});
  for (const auto& item : path_overrides) arguments.insert(arguments.end(), {"--data-path", item});
  return arguments;
}

std::vector<NamedSetting> RegistryChoice::values() const {
  std::vector<NamedSetting> values;
  if (!file.empty()) values.emplace_back("data_toml", file);
  if (!path_overrides.empty()) values.emplace_back("data_path", path_overrides);
  return values;
}

}  // namespace lockstep::tools
