#pragma once

#include <map>
#include <string>

#include "comm/world/environment.h"

namespace lockstep::testing {

/// An environment of exactly `values`, for the pure functions that read one (EnvLookup).
inline EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  };
}

}  // namespace lockstep::testing
