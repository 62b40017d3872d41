// `lockstep train` on a GPU: two worker processes sharing one GPU (their CUDA tensors are
// staged through host memory) train Fashion-MNIST to the CPU's accuracy, and a run stopped
// and resumed ends bit for bit where the uninterrupted one does. Labelled gpu.
#include <gtest/gtest.h>

#include "lockstep/train/device.h"
#include "weight_lines.h"

namespace lockstep::train {
namespace {

TEST(TrainOnGpu, TwoWorkersOnOneGpuReach91PercentInFiveEpochsAndResumeBitExactly) {
  if (visible_gpus() == 0)
    GTEST_SKIP() << "no CUDA device is visible, or this lockstep was built against a CPU libtorch";
  expect_accurate_and_resumed_bit_exactly({LOCKSTEP_TOOL, "train", "--device", "cuda", "-n", "2", "--mode", "processes",
                                           "--epochs", "5", "--deterministic"},
                                          91.0, 1000);
}

}  // namespace
}  // namespace lockstep::train
