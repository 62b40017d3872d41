#pragma once

// A model's tensors as text lines "NAME ELEMENT_SIZE SHAPE HEX" (HEX: the tensor's bytes),
// sorted, so that weights read by Python and by lockstep compare exactly.
#include <string>
#include <vector>

namespace lockstep::train {

/// What tests/train/print_weights.py prints for FILE: `kind` is "state-dict" (torch.load)
/// or "script" (torch.jit.load).
std::vector<std::string> python_weights(const std::string& kind, const std::string& file);
/// The same lines for a checkpoint's model tensors, read by lockstep.
std::vector<std::string> checkpoint_weights(const std::string& checkpoint);
/// The newest checkpoint of a lockstep train run folder.
std::string newest_checkpoint(const std::string& run);
/// Expects the same tensors, naming the first that differs.
void expect_same_weights(const std::vector<std::string>& expected, const std::vector<std::string>& actual);
/// Runs `job` (a `lockstep train` command without --out) whole, expecting at least
/// `min_top1`% test top-1, then stopped after step `stop_step` and resumed: the two runs
/// must end with the same parameters, optimizer steps and BatchNorm statistics, bit for bit.
void expect_accurate_and_resumed_bit_exactly(const std::vector<std::string>& job, double min_top1, int stop_step);

}  // namespace lockstep::train
