#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::train {

/// Metrics at one point of training, already reduced across ranks: a training log interval
/// (phase "train"), a validation pass (phase "val"), or a notice for people (phase "notice",
/// with a message and no values, such as a rank that keeps the others waiting).
struct Record {
  std::string phase;
  int64_t epoch = 0;                                   // counted from 1
  int64_t epochs = 0;                                  // in the whole run
  int64_t step = 0;                                    // optimizer steps so far, counted from 1
  int64_t total_steps = 0;                             // in the whole run
  double elapsed_seconds = 0;                          // since training started
  std::vector<std::pair<std::string, double>> values;  // e.g. loss, top1, top5, samples_per_second
  std::string message;                                 // phase "notice": one line

  /// The value called `name`, or NaN.
  double value(const std::string& name) const;
};

/// Where metrics go: FluxDistributed's "hook into your favourite MLOps backend". The
/// Trainer calls write() on rank 0 only, at each log interval and after each validation.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void write(const Record& record) = 0;
  /// Called at the end of each epoch and of training.
  virtual void flush() {}
};

/// One JSON object per record and line: {"phase":..,"epoch":..,"epochs":..,"step":..,
/// "total_steps":..,"time":..,"loss":..}; NaN is written as null. Appends, so a resumed run
/// continues the same file, and flushes every line, so a killed run keeps what it logged.
std::unique_ptr<MetricsSink> json_lines_sink(const std::string& path);

/// A header line, then one row per record; columns phase, epoch, step, time, then the values
/// of the first record written. Later records, and a resumed run appending to the file, must
/// have the same value names (else Error naming the file and both sets of names).
std::unique_ptr<MetricsSink> csv_sink(const std::string& path);

/// TensorBoard event files (TFRecord framing with masked CRC32C, Event and Summary protocol
/// buffers) under `dir`, created if missing: a new events.out.tfevents.<seconds>.<host> per
/// sink, one scalar "<phase>/<name>" per value at the record's step.
std::unique_ptr<MetricsSink> tensorboard_sink(const std::string& dir);

/// Human progress: when `interactive` (a terminal), a progress bar redrawn in place with
/// epoch, step, ETA, loss and samples/s, each update written as "TEXT\r" and the bar ended
/// by "\n"; otherwise one plain line per record, with no '\r' at all. Validation records get
/// a line of their own; top1/top5 print as percentages.
std::unique_ptr<MetricsSink> console_sink(std::ostream& out, bool interactive);

/// Whether this process's stdout should show console_sink's bar: when it is a terminal and no
/// launcher started the process (none of RANK, LOCKSTEP_RANK, OMPI_COMM_WORLD_RANK set), or
/// when lockstep's launcher, whose stdout is a terminal, says so with LOCKSTEP_TERMINAL=1.
/// Under mpirun or torchrun a worker's stdout may be a pty even when the job's output goes
/// to a file, so there it is plain lines.
bool interactive_console();

/// Reads a JSON Lines metrics file back (for plots and tests); null values read as NaN. A
/// missing file or a bad line throws DataError naming the file (and line).
std::vector<Record> read_json_lines(const std::string& path);

/// Loss and accuracy curves (train and val) of a run as an SVG document. Missing and
/// non-finite values are skipped; a step logged twice (a resumed run) keeps the later value.
std::string render_curves_svg(const std::vector<Record>& records, const std::string& title);

}  // namespace lockstep::train
