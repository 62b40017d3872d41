#include "run_config.h"

#include <sysexits.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "lockstep/error.h"
#include "optim/durable_file.h"

namespace lockstep::tools {
namespace {

// Settings of one invocation, not of the run: where it is, whether this start resumes it,
// and where this start ends.
const std::set<std::string> kNotRecorded = {"out", "resume", "stop_after_step", "config"};

// Settings that change what is trained: a resumed run keeps them. The others change how it
// runs: the workers (with a global batch each step trains the same samples on any number;
// without one, the launcher says how the steps change), the mode, device, ZeRO stage (the
// same bits on every stage), recovery, logging, checkpoints, --epochs to extend it.
const std::set<std::string> kTrainingKeys = {
    "dataset",      "model",    "precision",    "batch_size",     "global_batch_size", "optimizer", "lr",   "momentum",
    "weight_decay", "schedule", "warmup_steps", "clip_grad_norm", "scale_lr",          "augment",   "seed", "limit"};

std::string flag_of(const std::string& key) {
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// "FILE:LINE: " for a setting's line in a settings file.
std::string place(const std::string& path, const toml::node& node) {
  return path + ":" + std::to_string(node.source().begin.line) + ": ";
}

// A file's setting as SettingValue, or ConfigError naming its line.
SettingValue value_of(const std::string& path, const std::string& key, const toml::node& node) {
  if (auto text = node.value_exact<std::string>()) return *text;
  if (auto flag = node.value_exact<bool>()) return *flag;
  if (auto integer = node.value_exact<int64_t>()) return *integer;
  if (auto real = node.value_exact<double>()) return *real;
  if (const toml::array* list = node.as_array()) {
    std::vector<std::string> texts;
    for (const toml::node& item : *list) {
      auto text = item.value_exact<std::string>();
      if (!text) throw ConfigError(place(path, item) + "'" + key + "' must be a list of strings");
      texts.push_back(*text);
    }
    return texts;
  }
  throw ConfigError(place(path, node) + "'" + key + "' must be a string, number, boolean or list of strings");
}

// The shortest text that reads back as `value` exactly, a real to TOML (1.0, not 1).
std::string real_text(double value) {
  char text[32];
  const std::string shortest(text, std::to_chars(text, text + sizeof text, value).ptr);
  const bool integral = shortest.find_first_of(".eninf") == std::string::npos;
  return integral ? shortest + ".0" : shortest;
}

// The value as TOML writes it: 'mlp', 0.001, true, [ 'a=b' ].
std::string toml_text(const SettingValue& value) {
  if (auto real = std::get_if<double>(&value)) return real_text(*real);
  toml::table one;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          toml::array list;
          for (const auto& item : v) list.push_back(item);
          one.insert("v", std::move(list));
        } else {
          one.insert("v", v);
        }
      },
      value);
  std::ostringstream text;
  text << one;
  return text.str().substr(4);  // after "v = "
}

// As command-line values, for CLI11 to parse as if given.
std::vector<std::string> argument_texts(const SettingValue& value) {
  return std::visit(
      [](const auto& v) -> std::vector<std::string> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return v;
        } else {
          return {argument_of(v)};
        }
      },
      value);
}

bool same(const SettingValue& a, const SettingValue& b) {
  const auto number = [](const SettingValue& v) -> std::optional<double> {
    if (auto integer = std::get_if<int64_t>(&v)) return static_cast<double>(*integer);
    if (auto real = std::get_if<double>(&v)) return *real;
    return std::nullopt;
  };
  if (number(a) && number(b)) return *number(a) == *number(b);
  return a == b;
}

toml::table parse_settings(const std::string& path, const std::string& text) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    throw ConfigError(path + ":" + std::to_string(error.source().begin.line) + ": " + std::string(error.description()));
  }
}

// The file's settings, each with its option of `command`.
struct FileSetting {
  std::string key;
  SettingValue value;
  CLI::Option* option;
  const toml::node* node;
};

std::vector<FileSetting> settings_of(const std::string& path, const toml::table& table, CLI::App& command) {
  std::vector<FileSetting> settings;
  for (const auto& [name, node] : table) {
    const std::string key(name.str());
    if (key == "config") continue;
    CLI::Option* option = nullptr;
    try {
      option = command.get_option(flag_of(key));
    } catch (const CLI::OptionNotFound&) {
      throw ConfigError(place(path, node) + "unknown setting '" + key + "' (settings are the long flags of lockstep " +
                        command.get_name() + ", with _ for -)");
    }
    settings.push_back({key, value_of(path, key, node), option, &node});
  }
  return settings;
}

void apply(const std::string& path, const FileSetting& setting) {
  try {
    for (const auto& text : argument_texts(setting.value)) setting.option->add_result(text);
    setting.option->run_callback();
  } catch (const CLI::Error& error) {
    throw ConfigError(place(path, *setting.node) + setting.key + ": " + error.what());
  }
}

}  // namespace

std::string run_config_path(const std::string& out) { return out + "/config.toml"; }

void apply_settings_file(const std::string& path, CLI::App& command) {
  const auto text = optim::read_text(path);
  if (!text) throw ConfigError("--config " + path + ": no such file");
  const toml::table table = parse_settings(path, *text);
  for (const auto& setting : settings_of(path, table, command)) {
    if (setting.option->count() == 0) apply(path, setting);
  }
}

void save_run_config(const TrainJob& job) {
  std::string text =
      "# The settings of this lockstep train run: `lockstep train --out RUN --resume` continues it,\n"
      "# `lockstep train --config RUN/config.toml --out NEW` trains it again.\n";
  for (const auto& [key, value] : job.settings()) {
    if (kNotRecorded.count(key) == 0) text += key + " = " + toml_text(value) + "\n";
  }
  optim::make_folder(job.out);
  optim::save_text_atomically(text, run_config_path(job.out));
}

int train_keeping_run_config(const TrainJob& job, const std::function<int()>& train) {
  if (!job.settings_kept_after_training) save_run_config(job);
  const int status = train();
  if (job.settings_kept_after_training && (status == 0 || status == EX_TEMPFAIL)) save_run_config(job);
  return status;
}

TrainJob load_run_settings(const std::string& out) {
  const std::string path = run_config_path(out);
  const auto text = optim::read_text(path);
  if (!text) throw ConfigError(path + " is missing: is " + out + " the folder (--out) of a lockstep train run?");
  TrainJob job;
  CLI::App command("", "train");
  job.add_options(command);
  const toml::table table = parse_settings(path, *text);
  for (const auto& setting : settings_of(path, table, command)) apply(path, setting);
  // Its options belong to `command`, gone on return; nothing was given on a command line.
  job.workers_option = job.mode_option = job.lr_option = job.weight_decay_option = job.threads_option =
      job.recovery_option = nullptr;
  job.out = out;
  return job;
}

std::string take_run_config(TrainJob& job, CLI::App& command, bool in_a_worker) {
  const std::string path = run_config_path(job.out);
  const auto text = optim::read_text(path);
  if (!text) {
    job.settings_kept_after_training = true;
    return "lockstep train: " + path +
           " is missing (a run from before runs kept their settings): resuming with the flags given";
  }
  const toml::table table = parse_settings(path, *text);
  const auto settings = settings_of(path, table, command);
  std::vector<const FileSetting*> given;
  for (const auto& setting : settings) {
    if (setting.option->count() > 0) {
      given.push_back(&setting);
    } else if (!(in_a_worker && (setting.key == "workers" || setting.key == "mode"))) {
      apply(path, setting);
    }
  }
  // Compared once the file's settings are in: whether the workers' count matters depends on them.
  const auto now = job.settings();
  for (const FileSetting* setting : given) {
    if (kTrainingKeys.count(setting->key) == 0) continue;
    const auto here = std::find_if(now.begin(), now.end(), [&](const auto& s) { return s.first == setting->key; });
    if (here == now.end() || same(here->second, setting->value)) continue;
    throw ConfigError(place(path, *setting->node) + "this run trains with " + setting->key + " = " +
                      toml_text(setting->value) + ", not " + flag_of(setting->key) + " " + toml_text(here->second) +
                      ": a resumed run keeps what it trains with (leave out " + flag_of(setting->key) +
                      ", or train anew: --config " + path + " --out NEW)");
  }
  const auto workers = std::find_if(settings.begin(), settings.end(), [](const auto& s) { return s.key == "workers"; });
  if (!in_a_worker && job.global_batch_size == 0 && workers != settings.end() &&
      !same(workers->value, setting_value(job.workers))) {
    return "lockstep train: " + job.out + " trained on " + toml_text(workers->value) +
           " workers without --global-batch-size: on " + std::to_string(job.workers) + " each step trains " +
           std::to_string(job.batch_size * job.workers) + " examples, and the epoch it stopped in starts again";
  }
  return "";
}

}  // namespace lockstep::tools
