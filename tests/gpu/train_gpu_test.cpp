// `lockstep train` on a GPU: two worker processes sharing one GPU (their CUDA tensors are
// staged through host memory) train Fashion-MNIST to the CPU's accuracy, and a run stopped
// and resumed ends bit for bit where the uninterrupted one does. Labelled gpu.
#include <gtest/gtest.h>

#include "lockstep/train/device.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "weight_lines.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::numbers_on_lines;
using testing::run_process;
using testing::TemporaryDirectory;

TEST(TrainOnGpu, TwoWorkersOnOneGpuReach91PercentInFiveEpochsAndResumeBitExactly) {
  if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA device is visible, or this lockstep was built against a CPU libtorch";
  TemporaryDirectory dir;
  const std::vector<std::string> job = {LOCKSTEP_TOOL, "train", "--device", "cuda", "-n", "2", "--mode", "processes",
                                        "--epochs", "5", "--deterministic"};
  auto whole = job;
  whole.insert(whole.end(), {"--out", dir.path() + "/whole"});
  const auto trained = run_process(whole, {}, std::chrono::seconds(500));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto top1 = numbers_on_lines(trained.output, "(test top-1 )([0-9.]+)%");
  ASSERT_EQ(top1.size(), 1u) << trained.output;
  EXPECT_GE(top1[0], 91.0) << trained.output;

  auto interrupted = job;
  interrupted.insert(interrupted.end(), {"--out", dir.path() + "/interrupted"});
  auto first = interrupted;
  first.insert(first.end(), {"--stop-after-step", "1000"});
  const auto stopped = run_process(first, {}, std::chrono::seconds(500));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  ASSERT_TRUE(contains(stopped.output, "stopped after step 1000")) << stopped.output;
  interrupted.push_back("--resume");
  const auto resumed = run_process(interrupted, {}, std::chrono::seconds(500));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_weights(checkpoint_weights(newest_checkpoint(dir.path() + "/whole")),
                      checkpoint_weights(newest_checkpoint(dir.path() + "/interrupted")));
}

}  // namespace
}  // namespace lockstep::train
