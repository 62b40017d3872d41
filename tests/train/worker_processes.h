#pragma once

#include <signal.h>
#include <sys/types.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/models.h"
#include "support/tool_process.h"
#include "support/wait_for.h"

// What the tests of `lockstep train`'s worker processes share: the workers a launcher
// started, the CNN a checkpoint holds, and how two checkpoints' parameters compare.
namespace lockstep::train {

inline std::vector<pid_t> children_of(pid_t launcher) {
  std::ifstream file("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children");
  std::vector<pid_t> pids;
  for (pid_t pid; file >> pid;) pids.push_back(pid);
  return pids;
}

// Once `run` has printed `progress`, sends `signal` to its worker `victim` of the `expected`
// it must have then. Returns the workers as they were; empty, with a failure, when the
// progress did not come within a minute or the workers were not as many.
inline std::vector<pid_t> signal_worker_at(testing::ToolProcess& run, const std::string& progress, size_t expected,
                                           size_t victim, int signal) {
  if (!testing::wait_for([&] { return run.stdout_text().find(progress) != std::string::npos; })) {
    ADD_FAILURE() << "no '" << progress << "' within a minute:\n" << run.stdout_text() << run.stderr_text();
    return {};
  }
  const std::vector<pid_t> workers = children_of(run.pid());
  if (workers.size() != expected) {
    ADD_FAILURE() << workers.size() << " workers, not " << expected;
    return {};
  }
  kill(workers[victim], signal);
  return workers;
}

// A checkpoint's model (its optimizer state may be sharded across files: not read).
inline torch::nn::Sequential loaded_cnn(const std::string& checkpoint) {
  auto model = make_model("cnn", ModelOptions().in_channels(1).num_classes(10).image_size(28));
  load_model_weights(checkpoint, *model);
  return model;
}

// The same parameters, bit for bit, in two checkpoints of the CNN.
inline void expect_equal_parameters(const std::string& a, const std::string& b) {
  const auto pa = loaded_cnn(a)->named_parameters(), pb = loaded_cnn(b)->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key() << " differs between " << a << " and " << b;
  }
}

// Parameters equal to float rounding (the same training, summed in another order):
// max |a - b| <= 1e-6 max |a|, tensor by tensor.
inline void expect_close_parameters(const std::string& a, const std::string& b) {
  const auto pa = loaded_cnn(a)->named_parameters(), pb = loaded_cnn(b)->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    const double largest = pa[i].value().abs().max().item<double>();
    const double apart = (pa[i].value() - pb[i].value()).abs().max().item<double>();
    EXPECT_LE(apart, 1e-6 * largest) << pa[i].key() << " differs between " << a << " and " << b;
  }
}

}  // namespace lockstep::train
