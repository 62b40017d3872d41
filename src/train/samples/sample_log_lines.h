#pragma once

#include <cinttypes>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/train/sample_log.h"

// The lines of a sample log, written by SampleLogWriter and read by read_sample_log:
//   # lockstep sample log 1: 60000 samples, global batch 48, seed 7
//   step 1 epoch 1: 3 17 25 ...
//   epoch 1 ended after step 1250
//   # resumed at step 10 on 3 workers
// Text, so that grep and diff read it; ids ascending, so that two runs' lines compare.
namespace lockstep::train::sample_log_lines {

inline constexpr const char* kHeader =
    "# lockstep sample log 1: %" SCNd64 " samples, global batch %" SCNd64 ", seed %" SCNu64;
inline constexpr const char* kStep = "step %" SCNd64 " epoch %" SCNd64 ":%n";
inline constexpr const char* kEpochEnded = "epoch %" SCNd64 " ended after step %" SCNd64;

std::string header(const SampleLogHeader& header);
std::string step(int64_t epoch, int64_t step, const std::vector<int64_t>& sorted_ids);
std::string epoch_ended(int64_t epoch, int64_t step);
std::string resumed(int64_t step, int world_size);

// What one line is; the numbers it holds go to the out parameters.
enum class Kind { kHeader, kStep, kEpochEnded, kComment, kOther };
// A step line's ids go to `ids` (when given), ids past its "step S epoch E:" prefix.
Kind parse(const std::string& line, SampleLogHeader& header, LoggedStep& step, std::vector<int64_t>* ids);

}  // namespace lockstep::train::sample_log_lines
