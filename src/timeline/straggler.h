#pragma once

#include <optional>
#include <string>
#include <vector>

// What a straggler is, in one place, for the live notice (train/straggler_watch.h) and the
// summary of a timeline (summary.h). In each step, the rank whose data wait plus compute is
// the largest is the slowest. A rank that was the slowest, by more than a fifth over the
// others' median, in more than half of the steps looked at is a straggler, held back by
// data or by compute: whichever its excess over the others' median is larger in.
namespace lockstep::timeline {

/// One rank's step, in any unit.
struct StepTimes {
  double data = 0;     // waiting for the batch
  double compute = 0;  // forward, backward and the optimizer
};

/// The slowest rank of one step.
struct SlowestRank {
  int rank = -1;           // its index among the step's ranks; -1 with fewer than two
  double behind = 0;       // its data + compute over the others' median, less 1
  double data_excess = 0;  // over the others' median
  double compute_excess = 0;
};

SlowestRank slowest_of(const std::vector<StepTimes>& ranks);

struct Straggler {
  int rank = -1;
  double behind = 0;   // the median over the steps it was behind in
  double share = 0;    // of the steps, those it was behind in
  std::string reason;  // "data" or "compute"
};

/// The straggler over `steps`, each step's slowest rank, if there is one.
std::optional<Straggler> straggler_of(const std::vector<SlowestRank>& steps);

/// "data" or "compute", whichever a rank's excess over the others is larger in.
const char* reason_of(double data_excess, double compute_excess);

}  // namespace lockstep::timeline
