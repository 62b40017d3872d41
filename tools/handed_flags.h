#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
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

// A setting as a settings file (TOML) holds it: a string, a boolean, an integer, a real or
// a list of strings.
using SettingValue = std::variant<std::string, bool, int64_t, double, std::vector<std::string>>;

inline SettingValue setting_value(const std::string& value) { return value; }
inline SettingValue setting_value(bool value) { return value; }
inline SettingValue setting_value(double value) { return value; }
// TOML's integers are signed 64-bit: an unsigned value beyond them (a seed) is kept as its digits.
template <typename Integer, typename = std::enable_if_t<std::is_integral_v<Integer>>>
SettingValue setting_value(Integer value) {
  if constexpr (std::is_unsigned_v<Integer>) {
    if (value > static_cast<std::make_unsigned_t<int64_t>>(std::numeric_limits<int64_t>::max()))
      return std::to_string(value);
  }
  return static_cast<int64_t>(value);
}

// A setting by its settings-file key: the long flag without its dashes, _ for -.
using NamedSetting = std::pair<std::string, SettingValue>;

inline std::string setting_key(const std::string& flag) {
  std::string key = flag.substr(flag.find_first_not_of('-'));
  for (char& c : key) c = c == '-' ? '_' : c;
  return key;
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
      CLI::Option* added = kept(names, field, help);
      flags_.hand_on_.push_back([name = added->get_name(), field](const Settings& s, std::vector<std::string>& out) {
        if constexpr (std::is_same_v<T, std::string>) {
          if ((s.*field).empty()) return;
        }
        out.insert(out.end(), {name, argument_of(s.*field)});
      });
      return added;
    }

    /// --NAME alone, handed on when set; a flag on by default names its way off in `names`
    /// ("--NAME,!--no-NAME"), handed on when unset.
    CLI::Option* flag(const std::string& names, bool Settings::*field, const std::string& help) {
      CLI::Option* added = command_.add_flag(names, settings_.*field, help);
      flags_.record(added, field);
      const size_t bang = names.find('!');
      const std::string off = bang == std::string::npos ? "" : names.substr(bang + 1, names.find(',', bang) - bang - 1);
      flags_.hand_on_.push_back(
          [name = added->get_name(), off, field](const Settings& s, std::vector<std::string>& out) {
            if (s.*field) {
              out.push_back(name);
            } else if (!off.empty()) {
              out.push_back(off);
            }
          });
      return added;
    }

    /// Read here, but not handed on: a setting of the starting process alone.
    template <typename T>
    CLI::Option* kept(const std::string& names, T Settings::*field, const std::string& help) {
      CLI::Option* added = command_.add_option(names, settings_.*field, help);
      flags_.record(added, field);
      return added;
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

  /// Every flag declared here, kept ones too, by key with the value `settings` holds now; a
  /// string only when not empty.
  std::vector<NamedSetting> values(const Settings& settings) const {
    std::vector<NamedSetting> all;
    for (const auto& value : values_) {
      if (auto named = value(settings)) all.push_back(std::move(*named));
    }
    return all;
  }

 private:
  template <typename T>
  void record(const CLI::Option* option, T Settings::*field) {
    values_.push_back([key = setting_key(option->get_name()), field](const Settings& s) -> std::optional<NamedSetting> {
      if constexpr (std::is_same_v<T, std::string>) {
        if ((s.*field).empty()) return std::nullopt;
      }
      return NamedSetting{key, setting_value(s.*field)};
    });
  }

  // Names a flag's field by member pointer, not reference, so that a copy of the settings
  // hands on its own values.
  std::vector<std::function<void(const Settings&, std::vector<std::string>&)>> hand_on_;
  std::vector<std::function<std::optional<NamedSetting>(const Settings&)>> values_;
};

}  // namespace lockstep::tools
