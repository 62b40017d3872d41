#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

namespace lockstep::tools {

// A setting as a command-line value: every digit of a double, so that a process started with
// it gets exactly the value the user gave.
inline std::string argument_of(const std::string& value) { return value; }
inline std::string argument_of(bool value) { return value ? "true" : "false"; }
inline std::string argument_of(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}
template <typename Integer, typename = std::enable_if_t<std::is_integral_v<Integer>>>
std::string argument_of(Integer value) {
  return std::to_string(value);
}

// Flags declared once: each is an option of a CLI11 command, read into a field of `Settings`,
// and for the processes that command starts with the same settings, the same flag again with
// the value the field holds then (defaults resolved since parsing included).
template <typename Settings>
class HandedFlags {
 public:
  /// Declares flags on `command`, read into `settings`: only while the command is built.
  class Declaring {
   public:
    Declaring(HandedFlags& flags, CLI::App& command, Settings& settings)
        : flags_(flags), command_(command), settings_(settings) {}

    /// --NAME VALUE, handed on with its value; a string only when not empty.
    template <typename T>
    CLI::Option* option(const std::string& names, T Settings::*field, const std::string& help) {
      CLI::Option* added = command_.add_option(names, settings_.*field, help);
      flags_.hand_on_.push_back([name = added->get_name(), field](const Settings& s, std::vector<std::string>& out) {
        if constexpr (std::is_same_v<T, std::string>) {
          if ((s.*field).empty()) return;
        }
        out.insert(out.end(), {name, argument_of(s.*field)});
      });
      return added;
    }

    /// --NAME alone, handed on when set.
    CLI::Option* flag(const std::string& names, bool Settings::*field, const std::string& help) {
      CLI::Option* added = command_.add_flag(names, settings_.*field, help);
      flags_.hand_on_.push_back([name = added->get_name(), field](const Settings& s, std::vector<std::string>& out) {
        if (s.*field) out.push_back(name);
      });
      return added;
    }

    /// Read here, but not handed on: a setting of the starting process alone.
    template <typename T>
    CLI::Option* kept(const std::string& names, T Settings::*field, const std::string& help) {
      return command_.add_option(names, settings_.*field, help);
    }

   private:
    HandedFlags& flags_;
    CLI::App& command_;
    Settings& settings_;
  };

  Declaring declaring(CLI::App& command, Settings& settings) { return Declaring(*this, command, settings); }

  /// Every flag declared here but the kept ones, with the value `settings` holds now.
  std::vector<std::string> arguments(const Settings& settings) const {
    std::vector<std::string> all;
    for (const auto& hand_on : hand_on_) hand_on(settings, all);
    return all;
  }

 private:
  // Names a flag's field by member pointer, not reference, so that a copy of the settings
  // hands on its own values.
  std::vector<std::function<void(const Settings&, std::vector<std::string>&)>> hand_on_;
};

}  // namespace lockstep::tools
