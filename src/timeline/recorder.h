#pragma once

#include <atomic>
#include <string>

// What lockstep's own code records into the timeline (include/lockstep/timeline.h). Times
// are microseconds of the steady clock, which every process of a host shares; the writer
// moves each rank's onto rank 0's clock.
namespace lockstep::timeline::detail {

enum class Track : int { training = 1, buckets = 2, collectives = 3, marks = 4 };

// Process-wide by nature, like the clock it reads: recording must cost one load when off,
// without a recorder passed through every layer.
extern std::atomic<bool> recording;

inline bool on() { return recording.load(std::memory_order_relaxed); }

/// This rank's clock now, in microseconds (LOCKSTEP_TEST_CLOCK_OFFSET_US shifts one rank's).
double now_us(int rank);

/// A span from `start_us` to `end_us` ("X"), a span's begin ("B") or end ("E"), or an instant
/// ("i", at start_us). `args` is the inside of a JSON object ("\"bytes\": 512"), or empty.
void record(int rank, Track track, char phase, const std::string& name, double start_us, double end_us = 0,
            const std::string& args = "");

/// "\"text\"" with JSON's escapes.
std::string quoted(const std::string& text);

}  // namespace lockstep::timeline::detail
