#include "train/samples/sample_log_lines.h"

#include <cstdio>
#include <cstdlib>

namespace lockstep::train::sample_log_lines {

std::string header(const SampleLogHeader& h) {
  return "# lockstep sample log 1: " + std::to_string(h.dataset_size) + " samples, global batch " +
         std::to_string(h.global_batch_size) + ", seed " + std::to_string(h.seed);
}

std::string step(int64_t epoch, int64_t step, const std::vector<int64_t>& sorted_ids) {
  std::string line = "step " + std::to_string(step) + " epoch " + std::to_string(epoch) + ":";
  line.reserve(line.size() + sorted_ids.size() * 7);
  for (const int64_t id : sorted_ids) {
    line += ' ';
    line += std::to_string(id);
  }
  return line;
}

std::string epoch_ended(int64_t epoch, int64_t step) {
  return "epoch " + std::to_string(epoch) + " ended after step " + std::to_string(step);
}

std::string resumed(int64_t step, int world_size) {
  return "# resumed at step " + std::to_string(step) + " on " + std::to_string(world_size) +
         (world_size == 1 ? " worker" : " workers");
}

Kind parse(const std::string& line, SampleLogHeader& h, LoggedStep& s, std::vector<int64_t>* ids) {
  if (std::sscanf(line.c_str(), kHeader, &h.dataset_size, &h.global_batch_size, &h.seed) == 3) return Kind::kHeader;
  if (!line.empty() && line[0] == '#') return Kind::kComment;
  int prefix = 0;
  if (std::sscanf(line.c_str(), kStep, &s.step, &s.epoch, &prefix) == 2 && prefix > 0) {
    if (ids == nullptr) return Kind::kStep;
    ids->clear();
    const char* at = line.c_str() + prefix;
    for (;;) {
      while (*at == ' ') ++at;
      if (*at == '\0') return Kind::kStep;
      char* end = nullptr;
      const long long id = std::strtoll(at, &end, 10);
      if (end == at || (*end != ' ' && *end != '\0')) return Kind::kOther;
      ids->push_back(id);
      at = end;
    }
  }
  if (std::sscanf(line.c_str(), kEpochEnded, &s.epoch, &s.step) == 2) return Kind::kEpochEnded;
  return Kind::kOther;
}

}  // namespace lockstep::train::sample_log_lines
