#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::train {

/// What a sample log (TrainerOptions::sample_log) is of; a resume appends only to a log of
/// the same.
struct SampleLogHeader {
  int64_t dataset_size = 0;
  int64_t global_batch_size = 0;  // 0: a batch per worker
  uint64_t seed = 0;
};

/// One trained step: its epoch (from 1, as in metrics), its step (from 1), and the ids
/// (dataset indices) of the samples every rank trained in it, ascending.
struct LoggedStep {
  int64_t epoch = 0;
  int64_t step = 0;
  std::vector<int64_t> ids;
};

/// A sample log as read: one text line per step, "step 12 epoch 1: 3 17 25 ...", a line
/// "epoch 1 ended after step 11" when an epoch ends, "#" lines for the header and resumes.
struct SampleLog {
  SampleLogHeader header;
  std::vector<LoggedStep> steps;
  std::vector<int64_t> ended_epochs;
  /// The writer stopped in the middle of the last line (a crash); that line is left out.
  bool cut_last_line = false;
};

/// Reads a sample log; DataError naming the file and line of what is not one.
SampleLog read_sample_log(const std::string& path);

/// Whether every sample of each epoch was trained exactly once. `lines` has one line per
/// epoch, or ends at the first problem: a step missing from the log, or the first sample of
/// an epoch trained twice (with both steps) or never.
struct SampleAudit {
  bool every_sample_once = true;
  std::vector<std::string> lines;
};
SampleAudit audit_sample_log(const SampleLog& log);

}  // namespace lockstep::train
