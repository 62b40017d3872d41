// `lockstep train --global-batch-size` stopped mid-epoch on N workers and resumed on M: the
// sample log of the two parts equals the uninterrupted run's step by step, and `lockstep
// data audit` finds every sample once per epoch. From IDX files, local shards and shards
// served by nginx, with processes and threads.
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "packed_fashion.h"
#include "support/nginx_server.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "trained_steps.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;

// A `lockstep train` command for run folder `out`, with the flags in `extra`.
using Job = std::function<std::vector<std::string>(const std::string& out, std::vector<std::string> extra)>;

// 512 examples in global batches of 48: 11 steps an epoch (the last of 32), 2 epochs.
std::vector<std::string> global_batch_job(std::vector<std::string> data, const std::string& out,
                                          std::vector<std::string> extra) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,         "train", "--limit",  "512", "--val-limit", "128",
                                      "--global-batch-size", "48",    "--epochs", "2",   "--log-every", "4",
                                      "--warmup-steps",      "4",     "--out",    out};
  command.insert(command.end(), data.begin(), data.end());
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// Stopped after step 15 (the fourth of epoch 2) on N workers, resumed on M without
// --sample-log (a run with a log goes on writing it).
void expect_resumes_train_the_uninterrupted_samples(const Job& job, const std::string& dir) {
  const auto whole = run_process(job(dir + "/whole", {"-n", "2", "--sample-log"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string expected = trained_steps(dir + "/whole");
  ASSERT_TRUE(contains(expected, "epoch 2 ended after step 22")) << expected;

  struct Move {
    int from, to;
    std::string first_mode, second_mode;
  };
  for (const Move& move : {Move{2, 3, "processes", "threads"}, Move{3, 2, "threads", "processes"},
                           Move{4, 1, "threads", "threads"}, Move{1, 4, "processes", "processes"}}) {
    const std::string name = std::to_string(move.from) + " then " + std::to_string(move.to) + " workers";
    const std::string out = dir + "/from-" + std::to_string(move.from) + "-to-" + std::to_string(move.to);
    const auto first = run_process(job(
        out, {"-n", std::to_string(move.from), "--mode", move.first_mode, "--stop-after-step", "15", "--sample-log"}));
    ASSERT_EQ(first.exit_code, 0) << name << "\n" << first.output;
    const auto second = run_process(job(out, {"-n", std::to_string(move.to), "--mode", move.second_mode, "--resume"}));
    ASSERT_EQ(second.exit_code, 0) << name << "\n" << second.output;
    EXPECT_EQ(trained_steps(out), expected) << name;
    const auto audit = run_process({LOCKSTEP_TOOL, "data", "audit", out});
    EXPECT_EQ(audit.exit_code, 0) << name << "\n" << audit.output;
    EXPECT_TRUE(contains(audit.output,
                         "epoch 1: every sample once (512 of 512 samples in steps 1 to 11)\n"
                         "epoch 2: every sample once (512 of 512 samples in steps 12 to 22)\n"))
        << name << "\n"
        << audit.output;
  }
}

TEST(ResumeOnAnyWorldSize, FromIdxFilesEveryPairOfWorkerCountsTrainsTheUninterruptedRunsSamples) {
  testing::TemporaryDirectory dir;
  expect_resumes_train_the_uninterrupted_samples(
      [](const std::string& out, std::vector<std::string> extra) { return global_batch_job({}, out, extra); },
      dir.path());
  // Another seed would train other samples in the steps left: the run's config.toml refuses
  // it, and so does the sample log in a run folder without one (from before runs kept their
  // settings).
  const std::string out = dir.path() + "/from-2-to-3";
  const auto reseeded = [&] { return run_process(global_batch_job({}, out, {"--resume", "--seed", "1"})); };
  const auto refused = reseeded();
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "this run trains with seed = 0, not --seed 1")) << refused.output;
  EXPECT_EQ(testing::count_lines(refused.output), 1u) << refused.output;
  std::filesystem::remove(out + "/config.toml");
  const auto older = reseeded();
  EXPECT_NE(older.exit_code, 0);
  EXPECT_TRUE(contains(older.output,
                       "is of 512 samples, global batch 48, seed 0, but this run has 512 samples, "
                       "global batch 48, seed 1"))
      << older.output;
}

TEST(ResumeOnAnyWorldSize, FromLocalShardsEveryPairOfWorkerCountsTrainsTheUninterruptedRunsSamples) {
  PackedFashion data;
  const std::vector<std::string> shards = {"--data-toml", data.registry(), "--dataset", "fashion-shards"};
  expect_resumes_train_the_uninterrupted_samples(
      [&](const std::string& out, std::vector<std::string> extra) { return global_batch_job(shards, out, extra); },
      data.folder.path());
}

TEST(ResumeOnAnyWorldSize, FromShardsOverHttpEveryPairOfWorkerCountsTrainsTheUninterruptedRunsSamples) {
  PackedFashion data;
  testing::NginxServer http(data.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  const std::vector<std::string> shards = {"--data-toml", data.registry(),
                                           "--dataset",   "fashion-shards",
                                           "--data-path", "fashion-shards=" + http.url() + "/shards"};
  expect_resumes_train_the_uninterrupted_samples(
      [&](const std::string& out, std::vector<std::string> extra) { return global_batch_job(shards, out, extra); },
      data.folder.path());
}

}  // namespace
}  // namespace lockstep::train
