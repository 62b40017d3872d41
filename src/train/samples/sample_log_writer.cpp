#include "train/samples/sample_log_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <torch/types.h>

#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "train/samples/sample_log_lines.h"

namespace lockstep::train {
namespace {

std::string describe(const SampleLogHeader& h) {
  return std::to_string(h.dataset_size) + " samples, global batch " + std::to_string(h.global_batch_size) + ", seed " +
         std::to_string(h.seed);
}

}  // namespace

SampleLogWriter::SampleLogWriter(std::string path, const SampleLogHeader& header, const TrainingPosition& start,
                                 int world_size)
    : path_(std::move(path)) {
  const int64_t kept = start.step > 0 ? kept_bytes(header, start) : 0;
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ignored;  // open() below says what is wrong
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0 || ::ftruncate(fd_, kept) != 0 || ::lseek(fd_, kept, SEEK_SET) < 0) {
    const std::string reason = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw DataError("cannot write the sample log " + path_ + ": " + reason);
  }
  if (start.step == 0) {
    append_line(sample_log_lines::header(header));
  } else {
    append_line(sample_log_lines::resumed(start.step, world_size));
  }
  flush(false);
}

SampleLogWriter::~SampleLogWriter() {
  try {
    flush(false);
  } catch (const Error&) {
    // A destructor cannot report it; flush() before it does.
  }
  ::close(fd_);
}

int64_t SampleLogWriter::kept_bytes(const SampleLogHeader& header, const TrainingPosition& start) const {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    throw DataError("the sample log " + path_ + " is not there, but the run resumes from the checkpoint of step " +
                    std::to_string(start.step) + ", so the log would miss steps 1 to " + std::to_string(start.step) +
                    ": resume without --sample-log");
  }
  std::string line;
  int64_t offset = 0, kept = 0, last_step = 0;
  bool has_header = false;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (in.eof()) break;  // a line the writer did not finish
    offset += static_cast<int64_t>(line.size()) + 1;
    SampleLogHeader logged;
    LoggedStep step;
    switch (sample_log_lines::parse(line, logged, step, nullptr)) {
      case sample_log_lines::Kind::kHeader:
        if (logged.dataset_size != header.dataset_size || logged.global_batch_size != header.global_batch_size ||
            logged.seed != header.seed) {
          throw DataError("the sample log " + path_ + " is of " + describe(logged) + ", but this run has " +
                          describe(header) + ": resume with the same dataset, --global-batch-size and --seed");
        }
        has_header = number == 1;
        kept = offset;
        break;
      case sample_log_lines::Kind::kStep:
        if (step.step <= start.step) {
          last_step = step.step;
          kept = offset;
        }
        break;
      case sample_log_lines::Kind::kEpochEnded:
        if (step.epoch <= start.epoch) kept = offset;  // epochs from 1 in the log, from 0 in positions
        break;
      case sample_log_lines::Kind::kComment: break;
      case sample_log_lines::Kind::kOther:
        throw DataError(path_ + ", line " + std::to_string(number) + " is not a line of a sample log");
    }
  }
  if (!has_header) throw DataError(path_ + " is not a sample log: its first line is not \"# lockstep sample log\"");
  if (last_step != start.step) {
    throw DataError("the sample log " + path_ + " ends at step " + std::to_string(last_step) +
                    ", but the checkpoint this run resumes from is of step " + std::to_string(start.step) +
                    ": the log is not this run's");
  }
  return kept;
}

void SampleLogWriter::append_line(const std::string& line) {
  pending_ += line;
  pending_ += '\n';
}

void SampleLogWriter::add_step(int64_t epoch, int64_t step, std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  append_line(sample_log_lines::step(epoch, step, ids));
  if (pending_.size() >= (1 << 20)) flush(false);
}

void SampleLogWriter::add_epoch_end(int64_t epoch, int64_t step) {
  append_line(sample_log_lines::epoch_ended(epoch, step));
}

void SampleLogWriter::flush(bool durable) {
  size_t written = 0;
  while (written < pending_.size()) {
    const ssize_t n = ::write(fd_, pending_.data() + written, pending_.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw DataError("cannot write the sample log " + path_ + ": " + std::strerror(errno));
    written += static_cast<size_t>(n);
  }
  pending_.clear();
  if (durable && ::fsync(fd_) != 0) {
    throw DataError("cannot write the sample log " + path_ + " to disk: " + std::strerror(errno));
  }
}

std::vector<int64_t> gather_step_ids(const std::vector<int64_t>& ids, const ProcessGroup& group) {
  if (group.size() == 1) return ids;
  torch::Tensor count = torch::tensor({static_cast<int64_t>(ids.size())});
  const std::vector<torch::Tensor> counts = lockstep::all_gather(count, group);
  int64_t longest = 0;
  for (const auto& c : counts) longest = std::max(longest, c.item<int64_t>());
  if (longest == 0) return {};
  torch::Tensor padded = torch::full({longest}, -1, torch::kInt64);
  std::copy(ids.begin(), ids.end(), padded.data_ptr<int64_t>());
  std::vector<int64_t> all;
  for (const auto& part : lockstep::all_gather(padded, group)) {
    const int64_t* values = part.data_ptr<int64_t>();
    for (int64_t i = 0; i < part.numel(); ++i) {
      if (values[i] >= 0) all.push_back(values[i]);
    }
  }
  return all;
}

}  // namespace lockstep::train
