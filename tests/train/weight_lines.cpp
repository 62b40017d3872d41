#include "weight_lines.h"

#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "lockstep/train/checkpoint.h"
#include "support/world.h"

namespace lockstep::train {

using testing::contains;
using testing::lines_of;
using testing::numbers_on_lines;
using testing::run_process;

std::vector<std::string> python_weights(const std::string& kind, const std::string& file) {
  const auto printed = run_process({PYTHON, std::string(SCRIPTS) + "/print_weights.py", kind, file});
  EXPECT_EQ(printed.exit_code, 0) << printed.output.substr(0, 2000);
  std::vector<std::string> lines;
  for (const auto& line : lines_of(printed.output)) {
    if (line.rfind("tensor ", 0) == 0) lines.push_back(line.substr(7));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

namespace {

std::string hex_bytes(const torch::Tensor& tensor) {
  const auto contiguous = tensor.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(contiguous.data_ptr());
  std::string hex(2 * contiguous.nbytes(), '0');
  for (size_t i = 0; i < contiguous.nbytes(); ++i) std::snprintf(&hex[2 * i], 3, "%02x", bytes[i]);
  return hex;
}

}  // namespace

std::vector<std::string> checkpoint_weights(const std::string& checkpoint) {
  std::vector<std::string> lines;
  for (const auto& [name, tensor] : load_state_dict(checkpoint)) {
    std::string shape;
    for (const int64_t size : tensor.sizes()) shape += (shape.empty() ? "" : "x") + std::to_string(size);
    lines.push_back(name + " " + std::to_string(tensor.element_size()) + " " + shape + " " + hex_bytes(tensor));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string newest_checkpoint(const std::string& run) { return CheckpointFolder(run + "/checkpoints", 1).latest(); }

void expect_same_weights(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  ASSERT_FALSE(actual.empty());
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i], actual[i]) << "tensor " << actual[i].substr(0, actual[i].find(' '));
  }
}

void expect_accurate_and_resumed_bit_exactly(const std::vector<std::string>& job, double min_top1, int stop_step) {
  testing::TemporaryDirectory dir;
  const auto deadline = std::chrono::seconds(500);
  auto whole = job;
  whole.insert(whole.end(), {"--out", dir.path() + "/whole"});
  const auto trained = run_process(whole, {}, deadline);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto top1 = numbers_on_lines(trained.output, "(, top-1 )([0-9.]+)%");
  ASSERT_EQ(top1.size(), 1u) << trained.output;
  EXPECT_GE(top1[0], min_top1) << trained.output;

  auto interrupted = job;
  interrupted.insert(interrupted.end(), {"--out", dir.path() + "/interrupted"});
  auto first = interrupted;
  first.insert(first.end(), {"--stop-after-step", std::to_string(stop_step)});
  const auto stopped = run_process(first, {}, deadline);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  ASSERT_TRUE(contains(stopped.output, "stopped after step " + std::to_string(stop_step))) << stopped.output;
  interrupted.push_back("--resume");
  const auto resumed = run_process(interrupted, {}, deadline);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_weights(checkpoint_weights(newest_checkpoint(dir.path() + "/whole")),
                      checkpoint_weights(newest_checkpoint(dir.path() + "/interrupted")));
}

}  // namespace lockstep::train
