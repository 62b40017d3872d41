#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "timeline/straggler.h"

// What a merged timeline says: where each rank's steps went, and who kept the others waiting
// (`lockstep timeline summary`, `lockstep plot`).
namespace lockstep::timeline::detail {

/// One training step of one rank, in milliseconds.
struct StepSplit {
  int64_t step = 0;
  double data = 0;     // waiting for the batch
  double compute = 0;  // forward, backward and the optimizer, less the wait for gradients
  double exposed = 0;  // waiting for gradients at the end of backward: communication not hidden
  double comm = 0;     // collectives in flight during the step, overlapping or not
  /// The share of communication hidden behind compute, in percent.
  double overlap() const;
};

struct RankSteps {
  int rank = 0;
  std::string name;  // "rank 1 on HOST"
  std::vector<StepSplit> steps;
  StepSplit median() const;  // of each part over the steps
};

/// For one kind of collective: the rank that called it last most often.
struct LateCaller {
  std::string kind;    // "all_reduce"
  int64_t calls = 0;   // called by every rank of its group
  int rank = -1;       // last most often
  std::string name;    // "rank 1 on HOST"
  double share = 0;    // of the calls it was last at
  double late_ms = 0;  // by how much, the median when it was last (after the median of the others)
  std::string reason;  // "data" or "compute": where it spent more than the others (reason_of)
};

struct Summary {
  std::vector<RankSteps> ranks;
  std::vector<LateCaller> late_callers;
  std::optional<Straggler> straggler;  // over every step, as the live notice finds it
  std::string straggler_name;          // "rank 1 on HOST"
};

/// From a merged trace's events (trace_file.h). DataError when it holds no training steps.
Summary summarize(const nlohmann::json& events, const std::string& source);

/// The tables `lockstep timeline summary` prints.
std::string summary_table(const Summary& summary);
nlohmann::json summary_json(const Summary& summary);

/// Per step, the median over ranks of data wait, compute and exposed communication as
/// stacked bars: a standalone SVG.
std::string summary_svg(const Summary& summary, const std::string& title);

}  // namespace lockstep::timeline::detail
