#include "weight_lines.h"

#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "lockstep/train/checkpoint.h"
#include "support/world.h"

namespace lockstep::train {

using testing::lines_of;
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

}  // namespace lockstep::train
