// `lockstep train` checks every option in the launching process: a bad option or data
// folder is one line and a non-zero status, before any worker starts.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "lockstep/train/device.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "weight_lines.h"

namespace lockstep::train {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::lines_of;
using testing::run_process;
using testing::TemporaryDirectory;

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

struct BadOptions {
  std::vector<std::string> options;
  std::string named;  // what the one line must name
};

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Fashion-MNIST's files with its training images cut short.
std::string truncated_copy(const std::string& folder) {
  fs::create_directories(folder);
  for (const auto& entry : fs::directory_iterator(kFashionMnist)) fs::copy(entry.path(), folder);
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.find("train-images") != std::string::npos) fs::resize_file(entry.path(), 1000);
  }
  return folder;
}

std::vector<BadOptions> bad_options(const std::string& dir) {
  write_file(dir + "/not-a-model.pt", "a text file\n");
  write_file(dir + "/unknown.toml", "epochs = 2\nbatch = 3\n");
  fs::create_directories(dir + "/empty");
  const auto made =
      run_process({PYTHON, std::string(SCRIPTS) + "/make_scripted_model.py", dir + "/twelve.pt", "--classes", "12"});
  EXPECT_EQ(made.exit_code, 0) << made.output;
  std::vector<BadOptions> cases = {
      {{"--data-path", dir + "/missing"}, dir + "/missing"},
      {{"--data-path", dir + "/empty"}, dir + "/empty"},
      {{"--data-path", truncated_copy(dir + "/truncated")}, dir + "/truncated"},
      {{"--data-path", "fashion-mnist="}, "--data-path wants NAME=DIR"},
      {{"--data-path", "no-such-set=" + dir}, "no-such-set"},
      {{"--data-toml", dir + "/missing.toml"}, dir + "/missing.toml"},
      {{"--dataset", "no-such-set"}, "no-such-set"},
      {{"--val-split", "no-such-split"}, "no-such-split"},
      {{"--model", "no-such-model"}, "--model no-such-model is unknown"},
      {{"--model", dir + "/missing.pt"}, dir + "/missing.pt"},
      {{"--model", dir + "/not-a-model.pt"}, dir + "/not-a-model.pt"},
      {{"--model", dir + "/twelve.pt"}, "[1, 12]"},
      {{"--optimizer", "rmsprop"}, "--optimizer"},
      {{"--device", "tpu"}, "--device tpu is not a device"},
      {{"--precision", "fp8"}, "--precision"},
      {{"--schedule", "linear"}, "--schedule"},
      {{"--epochs", "0"}, "--epochs"},
      {{"--batch-size", "-1"}, "--batch-size"},
      {{"--lr", "-0.1"}, "--lr"},
      {{"-n", "0"}, "-n"},
      {{"--zero", "3"}, "--zero"},
      {{"--zero", "2", "--recovery", "live", "--global-batch-size", "64"}, "use --zero 1 with --recovery live"},
      {{"--config", dir + "/unknown.toml"}, dir + "/unknown.toml:2"},
      {{"--max-restarts", "2"}, "--max-restarts"},  // restarts are for processes
  };
  // Without a GPU (or a CUDA build), CUDA is a bad option that says which of the two is missing.
  if (visible_gpus() == 0) cases.push_back({{"--device", "cuda"}, "--device cuda: "});
  return cases;
}

// In both modes: one line from the launching process (no rank prefix), a non-zero status,
// no worker started (LOCKSTEP_TIMING makes a started rank 0 say so) and no run folder.
TEST(TrainOptions, EachBadOptionOrDataFolderIsOneLineAndNoWorkerStarts) {
  TemporaryDirectory dir;
  const auto cases = bad_options(dir.path());
  for (const std::string mode : {"processes", "threads"}) {
    for (const auto& bad : cases) {
      const std::string out = dir.path() + "/run";
      std::vector<std::string> command = {LOCKSTEP_TOOL, "train", "--mode", mode, "--out", out, "--epochs", "1"};
      if (bad.options[0] != "-n") command.insert(command.end(), {"-n", "2"});
      if (bad.options[0] == "--max-restarts" && mode == "processes") continue;  // then it is a good option
      command.insert(command.end(), bad.options.begin(), bad.options.end());
      const auto ran = run_process(command, {{"LOCKSTEP_TIMING", "1"}}, std::chrono::seconds(60));
      const std::string what = "--mode " + mode + " " + bad.options[0] + " " + bad.options[1];
      EXPECT_NE(ran.exit_code, 0) << what << ": " << ran.output;
      EXPECT_EQ(lines_of(ran.output).size(), 1u) << what << ": " << ran.output;
      EXPECT_TRUE(contains(ran.output, bad.named)) << what << ": " << ran.output;
      EXPECT_FALSE(contains(ran.output, "[rank")) << what << ": " << ran.output;
      EXPECT_FALSE(contains(ran.output, "timing")) << what << ": " << ran.output;
      EXPECT_FALSE(fs::exists(out)) << what << ": " << ran.output;
    }
  }
}

TEST(TrainOptions, ADataPathWithoutANameIsTheChosenDatasets) {
  TemporaryDirectory dir;
  fs::create_directories(dir.path() + "/copy");
  for (const auto& entry : fs::directory_iterator(kFashionMnist)) fs::copy(entry.path(), dir.path() + "/copy");
  const auto ran = run_process({LOCKSTEP_TOOL, "train", "--data-path", dir.path() + "/copy", "--limit", "256",
                                "--val-limit", "64", "--epochs", "1", "--out", dir.path() + "/run"});
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_TRUE(contains(ran.output, "(test split)")) << ran.output;
}

// Each optimizer trains (the loss falls) and its state comes back from a checkpoint: a run
// stopped in epoch 2 and resumed ends with the bits of one that never stopped.
TEST(TrainOptions, EachOptimizerTrainsAndResumesBitExactly) {
  TemporaryDirectory dir;
  for (const std::string optimizer : {"sgd", "adam", "adamw"}) {
    const auto job = [&](const std::string& out, std::vector<std::string> extra) {
      std::vector<std::string> command = {
          LOCKSTEP_TOOL, "train", "--optimizer",    optimizer, "--limit",  "512",
          "--val-limit", "256",   "--batch-size",   "32",      "--epochs", "2",
          "--log-every", "4",     "--warmup-steps", "2",       "--out",    dir.path() + "/" + out};
      command.insert(command.end(), extra.begin(), extra.end());
      return run_process(command);
    };
    const auto whole = job(optimizer + "-whole", {});
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    const auto losses = testing::numbers_on_lines(whole.output, "( step [0-9/]+ ETA \\S+ loss )([0-9.]+)");
    ASSERT_GE(losses.size(), 3u) << whole.output;
    EXPECT_LT(losses.back(), losses.front()) << optimizer << ": " << whole.output;
    const auto stopped = job(optimizer + "-resumed", {"--stop-after-step", "11"});
    ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
    const auto resumed = job(optimizer + "-resumed", {"--resume"});
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    expect_same_weights(checkpoint_weights(newest_checkpoint(dir.path() + "/" + optimizer + "-whole")),
                        checkpoint_weights(newest_checkpoint(dir.path() + "/" + optimizer + "-resumed")));
  }
}

}  // namespace
}  // namespace lockstep::train

namespace lockstep::train {
namespace {

// --zero 1 shards Adam's state across the workers: as processes and as threads it trains to
// the bits of --zero 0 (whose gradients are copied out of their buckets, where these runs
// keep them as views: the bits of both); stopped and resumed it ends with them too; its checkpoint continues
// on 3 workers and on 1 unsharded, and exports as any other. --zero 2, which shards the
// gradients too and clips across the workers, trains and resumes to the same bits, and its
// checkpoint continues on 3 workers.
TEST(TrainOptions, ZeroOneAndTwoTrainTheBitsOfZeroZeroResumeExactlyAndContinueOnOtherWorldSizes) {
  TemporaryDirectory dir;
  const auto job = [&](const std::string& out, std::vector<std::string> extra, const std::string& epochs = "2") {
    std::vector<std::string> command = {LOCKSTEP_TOOL,      "train", "--optimizer",    "adam",
                                        "--limit",          "512",   "--val-limit",    "256",
                                        "--batch-size",     "32",    "--epochs",       epochs,
                                        "--log-every",      "4",     "--warmup-steps", "2",
                                        "--clip-grad-norm", "1",     "--out",          dir.path() + "/" + out};
    command.insert(command.end(), extra.begin(), extra.end());
    const auto ran = run_process(command);
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    return ran;
  };
  job("unsharded", {"-n", "2", "--zero", "0", "--no-gradient-as-bucket-view"});
  job("threads", {"-n", "2", "--zero", "1", "--mode", "threads"});
  job("resumed", {"-n", "2", "--zero", "1", "--mode", "processes", "--stop-after-step", "11"});
  EXPECT_TRUE(fs::is_regular_file(dir.path() + "/resumed/checkpoints/step-0000000011.optimizer-1-of-2.pt"));
  job("resumed", {"-n", "2", "--zero", "1", "--mode", "processes", "--resume"});
  const auto unsharded = checkpoint_weights(newest_checkpoint(dir.path() + "/unsharded"));
  expect_same_weights(unsharded, checkpoint_weights(newest_checkpoint(dir.path() + "/threads")));
  expect_same_weights(unsharded, checkpoint_weights(newest_checkpoint(dir.path() + "/resumed")));
  job("zero-two", {"-n", "2", "--zero", "2", "--mode", "threads"});
  job("zero-two-resumed", {"-n", "2", "--zero", "2", "--mode", "processes", "--stop-after-step", "11"});
  job("zero-two-resumed", {"-n", "2", "--zero", "2", "--mode", "processes", "--resume"});
  expect_same_weights(unsharded, checkpoint_weights(newest_checkpoint(dir.path() + "/zero-two")));
  expect_same_weights(unsharded, checkpoint_weights(newest_checkpoint(dir.path() + "/zero-two-resumed")));
  const auto two_on_three = job("zero-two-resumed", {"-n", "3", "--zero", "2", "--resume"}, "3");
  EXPECT_TRUE(contains(two_on_three.output, "on 3 workers")) << two_on_three.output;

  job("regrouped", {"-n", "2", "--zero", "1", "--stop-after-step", "11"});
  const auto on_three = job("regrouped", {"-n", "3", "--zero", "1", "--resume"}, "3");
  EXPECT_TRUE(contains(on_three.output, "on 3 workers")) << on_three.output;
  EXPECT_TRUE(fs::is_regular_file(newest_checkpoint(dir.path() + "/regrouped")));
  job("regrouped", {"-n", "1", "--zero", "0", "--resume"}, "4");
  const auto exported =
      run_process({LOCKSTEP_TOOL, "export", dir.path() + "/regrouped", "--out", dir.path() + "/w.pt"});
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
  expect_same_weights(python_weights("state-dict", dir.path() + "/w.pt"),
                      checkpoint_weights(newest_checkpoint(dir.path() + "/regrouped")));
}

}  // namespace
}  // namespace lockstep::train
