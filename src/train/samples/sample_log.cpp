#include "lockstep/train/sample_log.h"

#include <fstream>
#include <optional>

#include "lockstep/error.h"
#include "train/samples/sample_log_lines.h"

namespace lockstep::train {

SampleLog read_sample_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read the sample log " + path);
  const DataError not_a_log(path + " is not a sample log: its first line is not \"# lockstep sample log\"");
  SampleLog log;
  std::string line;
  bool has_header = false;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string where = path + ", line " + std::to_string(number);
    if (in.eof()) {  // no newline: the writer stopped within this line
      log.cut_last_line = true;
      break;
    }
    LoggedStep step;
    const auto kind = sample_log_lines::parse(line, log.header, step, &step.ids);
    if (!has_header && kind != sample_log_lines::Kind::kHeader) throw not_a_log;
    switch (kind) {
      case sample_log_lines::Kind::kHeader:
        if (number != 1) throw DataError(where + ": a second header; a sample log has one, on its first line");
        if (log.header.dataset_size < 1) throw DataError(where + ": a dataset of no samples");
        has_header = true;
        break;
      case sample_log_lines::Kind::kStep: log.steps.push_back(std::move(step)); break;
      case sample_log_lines::Kind::kEpochEnded: log.ended_epochs.push_back(step.epoch); break;
      case sample_log_lines::Kind::kComment: break;
      case sample_log_lines::Kind::kOther:
        throw DataError(where + " is neither a step (\"step S epoch E: ids\") nor an epoch's end: \"" +
                        line.substr(0, 80) + "\"");
    }
  }
  if (!has_header) throw not_a_log;
  return log;
}

namespace {

// One epoch's samples as the audit walks the log: the step that first trained each.
class EpochTally {
 public:
  EpochTally(int64_t epoch, int64_t dataset_size)
      : epoch_(epoch), first_step_(static_cast<size_t>(dataset_size), 0), first_logged_step_(0) {}

  int64_t epoch() const { return epoch_; }

  // A problem with the step's ids, or nullopt.
  std::optional<std::string> add(const LoggedStep& step) {
    if (first_logged_step_ == 0) first_logged_step_ = step.step;
    last_logged_step_ = step.step;
    for (const int64_t id : step.ids) {
      if (id < 0 || id >= static_cast<int64_t>(first_step_.size())) {
        return "step " + std::to_string(step.step) + " trained sample " + std::to_string(id) + ", outside the " +
               std::to_string(first_step_.size()) + " samples of the dataset";
      }
      int64_t& first = first_step_[static_cast<size_t>(id)];
      if (first != 0) {
        return "epoch " + std::to_string(epoch_) + ": sample " + std::to_string(id) + " was trained twice, at step " +
               std::to_string(first) + " and at step " + std::to_string(step.step);
      }
      first = step.step;
      ++trained_;
    }
    return std::nullopt;
  }

  // The epoch's line: every sample once, or the first never trained; an epoch the log
  // does not end is in progress.
  std::string close(bool ended, bool& every_sample_once) const {
    const std::string steps =
        "steps " + std::to_string(first_logged_step_) + " to " + std::to_string(last_logged_step_);
    const std::string counted = std::to_string(trained_) + " of " + std::to_string(first_step_.size()) + " samples";
    if (!ended)
      return "epoch " + std::to_string(epoch_) + ": in progress, " + counted + " so far (" + steps + "), none twice";
    for (size_t id = 0; id < first_step_.size(); ++id) {
      if (first_step_[id] == 0) {
        every_sample_once = false;
        return "epoch " + std::to_string(epoch_) + ": sample " + std::to_string(id) + " was never trained (" + counted +
               " in " + steps + ")";
      }
    }
    return "epoch " + std::to_string(epoch_) + ": every sample once (" + counted + " in " + steps + ")";
  }

 private:
  int64_t epoch_;
  std::vector<int64_t> first_step_;  // 0: not trained yet
  int64_t first_logged_step_, last_logged_step_ = 0;
  int64_t trained_ = 0;
};

}  // namespace

SampleAudit audit_sample_log(const SampleLog& log) {
  SampleAudit audit;
  const auto fail = [&](std::string line) {
    audit.every_sample_once = false;
    audit.lines.push_back(std::move(line));
    return audit;
  };
  const auto ended = [&](int64_t epoch) {
    for (const int64_t e : log.ended_epochs) {
      if (e == epoch) return true;
    }
    return false;
  };
  std::optional<EpochTally> tally;
  int64_t previous_step = 0;
  for (const LoggedStep& step : log.steps) {
    if (step.step != previous_step + 1) {
      return fail("step " + std::to_string(previous_step + 1) + " is missing from the log: step " +
                  std::to_string(step.step) + " follows step " + std::to_string(previous_step));
    }
    previous_step = step.step;
    if (!tally || tally->epoch() != step.epoch) {
      if (tally) {
        // A later epoch began, so this one is over whether or not its end was logged.
        audit.lines.push_back(tally->close(true, audit.every_sample_once));
        if (!audit.every_sample_once) return audit;
      }
      tally.emplace(step.epoch, log.header.dataset_size);
    }
    if (auto problem = tally->add(step)) return fail(*problem);
  }
  if (tally) audit.lines.push_back(tally->close(ended(tally->epoch()), audit.every_sample_once));
  return audit;
}

}  // namespace lockstep::train
