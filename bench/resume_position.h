#pragma once

#include <string>

namespace lockstep::bench {

// A global batch's resume on another number of workers, over synthetic shards under
// `scratch`: the time from a worker's start to its first batch for an index of 1,000,000
// samples in 1,000 shards, and the shards read by a job stopped on N workers and resumed
// on M against uninterrupted ones. Prints two tables.
void measure_resume_on_another_world_size(const std::string& scratch);

}  // namespace lockstep::bench
