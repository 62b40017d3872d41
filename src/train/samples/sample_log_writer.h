#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/comm/process_group.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/sample_log.h"

namespace lockstep::train {

// Rank 0's sample log (TrainerOptions::sample_log), appended step by step.
class SampleLogWriter {
 public:
  // For a run that starts at `start`. At step 0, a new log (one there already is replaced:
  // none of its steps was checkpointed). Later, the log there must have the same header and
  // reach start.step: the lines after it (trained, but not in the checkpoint, so trained
  // again) are cut and a line says the run resumed. DataError naming the file and the
  // values that differ otherwise.
  SampleLogWriter(std::string path, const SampleLogHeader& header, const TrainingPosition& start, int world_size);
  ~SampleLogWriter();
  SampleLogWriter(const SampleLogWriter&) = delete;
  SampleLogWriter& operator=(const SampleLogWriter&) = delete;

  // `epoch` from 1; `ids` in any order.
  void add_step(int64_t epoch, int64_t step, std::vector<int64_t> ids);
  void add_epoch_end(int64_t epoch, int64_t step);
  // Writes what is buffered, and to disk when `durable`: before each checkpoint, so that
  // the log always reaches the newest checkpoint's step.
  void flush(bool durable);

 private:
  // Where the log's lines up to `start` end; DataError when it does not fit the run.
  int64_t kept_bytes(const SampleLogHeader& header, const TrainingPosition& start) const;
  void append_line(const std::string& line);

  std::string path_;
  int fd_ = -1;
  std::string pending_;
};

// The ids every rank trained in a step, on every rank (two small all_gathers: the counts,
// then the ids padded to the longest).
std::vector<int64_t> gather_step_ids(const std::vector<int64_t>& ids, const ProcessGroup& group);

}  // namespace lockstep::train
