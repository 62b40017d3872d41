#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "train_job.h"

// RUN/config.toml: every resolved setting of a `lockstep train` run, in the format --config
// reads, kept beside its checkpoints (in the bucket for --out s3://...). `--out RUN --resume`
// alone continues the run from it; `--config RUN/config.toml --out NEW` trains it again.
namespace lockstep::tools {

/// The file that keeps the settings of the run whose --out is `out`.
std::string run_config_path(const std::string& out);

/// Set in the environment of the workers a launching process started: it keeps the run's
/// settings (with its own), so they do not.
inline constexpr const char* kRunConfigSavedVariable = "LOCKSTEP_RUN_CONFIG_SAVED";

/// Fills the options of `command` that its command line left unset from the settings file
/// `path` (--config's): flags win. ConfigError naming the file, line and key that is
/// unknown or cannot be read.
void apply_settings_file(const std::string& path, CLI::App& command);

/// Writes the settings of `job` to run_config_path(job.out), whole or not at all.
void save_run_config(const TrainJob& job);

/// Runs `train` (returning an exit status) with the run's settings saved before it, or for
/// job.settings_kept_after_training after it, when it ended trained or preempted.
int train_keeping_run_config(const TrainJob& job, const std::function<int()>& train);

/// The settings the run at `out` kept, with `out` set; ConfigError when it kept none.
TrainJob load_run_settings(const std::string& out);

/// For --resume: the run's config.toml fills the options the command line left unset (but
/// the workers' count and mode inside a launched worker, which its launch decides), and a
/// flag that would change the training itself is a ConfigError naming the key and both
/// values. Returns a line for the user, or "": a run folder without config.toml (from before
/// runs kept their settings) resumes with the flags given (and keeps them once trained:
/// job.settings_kept_after_training), and a run without a global batch resumed on other
/// workers trains other steps.
std::string take_run_config(TrainJob& job, CLI::App& command, bool in_a_worker);

}  // namespace lockstep::tools
