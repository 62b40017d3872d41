#pragma once

#include <string>
#include <vector>

#include "lockstep/comm/process_group.h"

// A timeline of every rank's training steps, DistributedDataParallel's buckets and the
// collectives, as Chrome trace-event JSON (open it in Perfetto or chrome://tracing): one
// process row per rank, named "rank R on HOST", with tracks for the training loop, the
// buckets, the collectives and marks (mismatches, restarts). Off unless started; when off,
// recording is one relaxed atomic load. Events go to a buffer of the recording thread and a
// background thread writes them out.
namespace lockstep::timeline {

/// Starts writing this rank's timeline to `PREFIX.rank-R.json` (R: its rank in the default
/// group). Every rank of `group` calls it together: it measures this rank's clock against
/// rank 0's (the quickest of several round trips) and writes times on rank 0's clock, so that
/// ranks on different hosts line up. init() calls it when LOCKSTEP_TIMELINE=PREFIX is set.
void start(const std::string& prefix, const ProcessGroup& group = ProcessGroup());

/// Writes out what this rank recorded and closes its file; the file it wrote, or "" when
/// its timeline was not started. shutdown() calls it.
std::string stop();

/// Whether any rank of this process records.
bool enabled();

/// Marks [construction, destruction) as `name` on this rank's training-loop track, nested in
/// any span open on it: a user's own phases beside lockstep's.
class Span {
 public:
  explicit Span(std::string name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  std::string name_;
  int rank_ = -1;  // -1: not recording
};

/// Merges per-rank timelines into one trace at `out`, each track's events in time order.
void merge(const std::vector<std::string>& files, const std::string& out);

}  // namespace lockstep::timeline
