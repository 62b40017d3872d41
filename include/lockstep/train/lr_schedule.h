#pragma once

#include <cstdint>
#include <string>

#include <torch/arg.h>

namespace lockstep::train {

/// How the learning rate moves over a run. Steps are optimizer steps counted from 0.
struct ScheduleOptions {
  /// "constant", "step" (multiply by gamma every step_epochs epochs) or "cosine" (from the
  /// base rate down to min_lr over the run, after the warm-up).
  TORCH_ARG(std::string, kind) = "constant";
  /// Linear warm-up over this many steps: the rate climbs from base/warmup_steps to base,
  /// as in Goyal et al.'s large-batch recipe.
  TORCH_ARG(int64_t, warmup_steps) = 0;
  TORCH_ARG(int64_t, step_epochs) = 30;
  TORCH_ARG(double, gamma) = 0.1;
  TORCH_ARG(double, min_lr) = 0;
};

/// The learning rate at `step` of a run of `total_steps` with `steps_per_epoch` per epoch.
/// Unknown kinds or negative sizes throw ConfigError.
double learning_rate(const ScheduleOptions& schedule, double base_lr, int64_t step, int64_t total_steps,
                     int64_t steps_per_epoch);

/// Checks a schedule up front (ConfigError naming the bad field).
void check_schedule(const ScheduleOptions& schedule);

}  // namespace lockstep::train
