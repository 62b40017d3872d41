#include "lockstep/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "lockstep/error.h"

namespace lockstep::train {

void check_schedule(const ScheduleOptions& schedule) {
  const std::string& kind = schedule.kind();
  if (kind != "constant" && kind != "step" && kind != "cosine") {
    throw ConfigError("learning-rate schedule '" + kind + "' is unknown (known: constant, step, cosine)");
  }
  if (schedule.warmup_steps() < 0) throw ConfigError("warmup_steps must not be negative");
  if (kind == "step" && schedule.step_epochs() < 1) throw ConfigError("step_epochs must be at least 1");
  if (schedule.gamma() <= 0) throw ConfigError("gamma must be positive");
  if (schedule.min_lr() < 0) throw ConfigError("min_lr must not be negative");
}

double learning_rate(const ScheduleOptions& schedule, double base_lr, int64_t step, int64_t total_steps,
                     int64_t steps_per_epoch) {
  check_schedule(schedule);
  const int64_t warmup = schedule.warmup_steps();
  if (step < warmup) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (schedule.kind() == "step") {
    const int64_t epoch = steps_per_epoch > 0 ? step / steps_per_epoch : 0;
    return base_lr * std::pow(schedule.gamma(), static_cast<double>(epoch / schedule.step_epochs()));
  }
  if (schedule.kind() == "cosine") {
    const double span = static_cast<double>(std::max<int64_t>(total_steps - warmup, 1));
    const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
    return schedule.min_lr() + (base_lr - schedule.min_lr()) * 0.5 * (1 + std::cos(M_PI * progress));
  }
  return base_lr;
}

}  // namespace lockstep::train
