#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>
#include <vector>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/models.h"

// What the tests of `lockstep train`'s worker processes share: the workers a launcher
// started, and the CNN a checkpoint holds.
namespace lockstep::train {

inline std::vector<pid_t> children_of(pid_t launcher) {
  std::ifstream file("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children");
  std::vector<pid_t> pids;
  for (pid_t pid; file >> pid;) pids.push_back(pid);
  return pids;
}

// A checkpoint's model (its optimizer state may be sharded across files: not read).
inline torch::nn::Sequential loaded_cnn(const std::string& checkpoint) {
  auto model = make_model("cnn", ModelOptions().in_channels(1).num_classes(10).image_size(28));
  load_model_weights(checkpoint, *model);
  return model;
}

}  // namespace lockstep::train
