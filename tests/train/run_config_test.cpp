// A run folder that describes its run (RUN/config.toml): `--out RUN --resume` alone continues
// a run of any settings bit-exactly, a flag that would change the training is refused, the
// file trains the same bits elsewhere, and a broken one is one line.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;
using testing::TemporaryDirectory;

namespace fs = std::filesystem;

// Nothing here is a default: the MLP, AdamW, ZeRO-1 on 3 workers, global batches of 48 over
// 384 examples (8 steps an epoch), 2 epochs.
std::vector<std::string> non_default_job(const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> command = {
      LOCKSTEP_TOOL, "train", "--model",  "mlp", "--optimizer",         "adamw", "--lr",    "0.002",
      "-n",          "3",     "--zero",   "1",   "--global-batch-size", "48",    "--limit", "384",
      "--val-limit", "96",    "--epochs", "2",   "--warmup-steps",      "3",     "--seed",  "7",
      "--log-every", "4",     "--out",    out};
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// The same model tensors, bit for bit, in the newest checkpoints of two runs.
void expect_same_model(const std::string& run, const std::string& other) {
  const auto a = load_state_dict(CheckpointFolder(run + "/checkpoints", 1).latest());
  const auto b = load_state_dict(CheckpointFolder(other + "/checkpoints", 1).latest());
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first << " differs between " << run << " and " << other;
  }
}

class RunConfig : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TemporaryDirectory;
    const auto whole = run_process(non_default_job(whole_run(), {"--mode", "threads"}));
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    whole_output_ = new std::string(whole.output);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    delete whole_output_;
    whole_output_ = nullptr;
  }
  static std::string whole_run() { return dir_->path() + "/whole"; }
  static TemporaryDirectory* dir_;
  static std::string* whole_output_;
};

TemporaryDirectory* RunConfig::dir_ = nullptr;
std::string* RunConfig::whole_output_ = nullptr;

TEST_F(RunConfig, ANonDefaultRunStoppedMidEpochResumesWithResumeAloneToTheUninterruptedBits) {
  for (const std::string mode : {"threads", "processes"}) {
    const std::string out = dir_->path() + "/stopped-" + mode;
    const auto first = run_process(non_default_job(out, {"--mode", mode, "--stop-after-step", "11"}));
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string continue_with = "continue with: lockstep train --out " + out + " --resume";
    ASSERT_TRUE(contains(first.output, continue_with)) << first.output;
    // As printed.
    const auto second = run_process({LOCKSTEP_TOOL, "train", "--out", out, "--resume"});
    ASSERT_EQ(second.exit_code, 0) << mode << "\n" << second.output;
    EXPECT_TRUE(contains(second.output, "mlp on fashion-mnist")) << second.output;
    EXPECT_TRUE(contains(second.output, "on 3 workers")) << second.output;
    EXPECT_EQ(mode == "processes", contains(second.output, "[rank 0]")) << second.output;
    expect_same_model(whole_run(), out);
  }
}

TEST_F(RunConfig, AChangedTrainingFlagIsRefusedNamingTheKeyAndBothValuesAnExecutionFlagIsNot) {
  const std::string out = dir_->path() + "/changed";
  const auto first = run_process(non_default_job(out, {"--stop-after-step", "5"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string config = out + "/config.toml";
  struct Change {
    std::vector<std::string> flags;
    std::string expected;
  };
  for (const Change& change :
       {Change{{"--optimizer", "sgd"}, "this run trains with optimizer = 'adamw', not --optimizer 'sgd'"},
        Change{{"--lr", "0.02"}, "this run trains with lr = 0.002, not --lr 0.02"},
        Change{{"--model", "cnn"}, "this run trains with model = 'mlp', not --model 'cnn'"},
        Change{{"--global-batch-size", "96"},
               "this run trains with global_batch_size = 48, not --global-batch-size 96"},
        Change{{"--seed", "8"}, "this run trains with seed = 7, not --seed 8"}}) {
    std::vector<std::string> command = {LOCKSTEP_TOOL, "train", "--out", out, "--resume"};
    command.insert(command.end(), change.flags.begin(), change.flags.end());
    const auto refused = run_process(command);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_TRUE(contains(refused.output, "lockstep train: " + config + ":")) << refused.output;
    EXPECT_TRUE(contains(refused.output, change.expected)) << refused.output;
    EXPECT_EQ(testing::count_lines(refused.output), 1u) << refused.output;
  }
  // How it runs may change: the workers (under a global batch), the mode, the ZeRO stage
  // (the same bits), logging, and more epochs; the next --resume goes on with the new ones.
  const auto accepted = run_process({LOCKSTEP_TOOL, "train", "--out", out, "--resume", "-n", "2", "--mode", "processes",
                                     "--zero", "0", "--log-every", "2", "--epochs", "3", "--stop-after-step", "18"});
  ASSERT_EQ(accepted.exit_code, 0) << accepted.output;
  EXPECT_TRUE(contains(accepted.output, "stopped after step 18")) << accepted.output;
  const auto extended = run_process({LOCKSTEP_TOOL, "train", "--out", out, "--resume"});
  ASSERT_EQ(extended.exit_code, 0) << extended.output;
  EXPECT_TRUE(contains(extended.output, "after 3 epochs on 2 workers")) << extended.output;
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step-0000000024.pt"));
}

TEST_F(RunConfig, TheRunsConfigFileTrainsTheSameBitsInAnotherFolder) {
  const std::string again = dir_->path() + "/again";
  const auto ran = run_process({LOCKSTEP_TOOL, "train", "--config", whole_run() + "/config.toml", "--out", again});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  expect_same_model(whole_run(), again);
  std::ifstream a(whole_run() + "/config.toml"), b(again + "/config.toml");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
}

TEST_F(RunConfig, AHandBrokenConfigIsOneLineNamingTheFileLineAndKey) {
  const std::string out = dir_->path() + "/broken";
  fs::create_directories(out);
  const std::string config = out + "/config.toml";
  struct Broken {
    std::string text, expected;
  };
  for (const Broken& broken :
       {Broken{"model = 'mlp'\nepochs = 'three'\n", config + ":2: epochs: "},
        Broken{"model = 'mlp'\n\nlearning_rate = 0.1\n", config + ":3: unknown setting 'learning_rate'"},
        Broken{"model = 'mlp'\nlr = [1, 2]\n", config + ":2: 'lr' must be a list of strings"},
        Broken{"model = 'mlp'\nlr = = 1\n", config + ":2: "}}) {
    std::ofstream(config) << broken.text;
    const auto refused = run_process({LOCKSTEP_TOOL, "train", "--out", out, "--resume"});
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_TRUE(contains(refused.output, "lockstep train: " + broken.expected)) << refused.output;
    EXPECT_EQ(testing::count_lines(refused.output), 1u) << refused.output;
  }
}

// A run folder from before runs kept their settings resumes with the flags given, saying so
// once, and keeps them from then on.
TEST_F(RunConfig, ARunWithoutConfigResumesWithTheFlagsGivenAndSaysSoOnce) {
  const std::string out = dir_->path() + "/older";
  const auto first = run_process(non_default_job(out, {"--stop-after-step", "5"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  fs::remove(out + "/config.toml");
  const auto second = run_process(non_default_job(out, {"--mode", "processes", "--resume"}));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const std::string note = out + "/config.toml is missing (a run from before runs kept their settings)";
  EXPECT_TRUE(contains(second.output, note)) << second.output;
  EXPECT_EQ(second.output.find(note), second.output.rfind(note)) << second.output;
  EXPECT_TRUE(fs::exists(out + "/config.toml"));
  expect_same_model(whole_run(), out);
}

// The run's last line and `lockstep eval` print the same figures, whatever the workers.
TEST_F(RunConfig, EvalPrintsTheRunsFinalValidationFiguresOnOneAndTwoWorkers) {
  const std::string& output = *whole_output_;
  const auto at = output.find("validation loss ");
  ASSERT_NE(at, std::string::npos) << output;
  const std::string figures = output.substr(at + 11, output.find(" (test split)", at) - at - 11);
  ASSERT_TRUE(contains(figures, ", top-1 ")) << output;
  for (const std::string workers : {"1", "2"}) {
    const auto eval = run_process({LOCKSTEP_TOOL, "eval", whole_run(), "-n", workers});
    ASSERT_EQ(eval.exit_code, 0) << eval.output;
    EXPECT_TRUE(contains(eval.output, "mlp on fashion-mnist, " + whole_run() +
                                          "/checkpoints/step-0000000016.pt: test " + figures + " (96 samples on " +
                                          workers + " worker"))
        << figures << "\n"
        << eval.output;
  }
  const auto earlier = run_process(
      {LOCKSTEP_TOOL, "eval", whole_run(), "--checkpoint", whole_run() + "/checkpoints/step-0000000008.pt"});
  ASSERT_EQ(earlier.exit_code, 0) << earlier.output;
  EXPECT_FALSE(contains(earlier.output, figures)) << earlier.output;
  const auto train_split = run_process({LOCKSTEP_TOOL, "eval", whole_run(), "--split", "train"});
  ASSERT_EQ(train_split.exit_code, 0) << train_split.output;
  EXPECT_TRUE(contains(train_split.output, ": train loss ")) << train_split.output;
  EXPECT_TRUE(contains(train_split.output, "(384 samples on 1 worker")) << train_split.output;
  const auto no_run = run_process({LOCKSTEP_TOOL, "eval", dir_->path()});
  EXPECT_EQ(no_run.exit_code, 2) << no_run.output;
  EXPECT_TRUE(contains(no_run.output, "lockstep eval: " + dir_->path() + "/config.toml is missing")) << no_run.output;
}

}  // namespace
}  // namespace lockstep::train
