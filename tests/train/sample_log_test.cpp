// The sample log: what a writer writes reads back, a resume cuts the steps trained after its
// checkpoint and refuses a log that is not its run's, and the audit names the first sample
// missing or trained twice.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "lockstep/error.h"
#include "lockstep/train/sample_log.h"
#include "support/expected_errors.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "train/samples/sample_log_writer.h"

namespace lockstep::train {
namespace {

using testing::TemporaryDirectory;

const SampleLogHeader kSix{6, 3, 7};  // 6 samples, global batch 3, seed 7: 2 steps an epoch

// Epoch 1 in steps 1 and 2, epoch 2's first step: what a run stopped after step 3 wrote.
void write_three_steps(const std::string& path) {
  SampleLogWriter writer(path, kSix, TrainingPosition{}, 2);
  writer.add_step(1, 1, {4, 0, 2});
  writer.add_step(1, 2, {5, 1, 3});
  writer.add_epoch_end(1, 2);
  writer.add_step(2, 3, {1, 2, 3});
}

TEST(SampleLog, WhatTheWriterWritesReadsBackWithIdsAscending) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/samples.log";
  write_three_steps(path);
  EXPECT_EQ(testing::read_file(path),
            "# lockstep sample log 1: 6 samples, global batch 3, seed 7\n"
            "step 1 epoch 1: 0 2 4\n"
            "step 2 epoch 1: 1 3 5\n"
            "epoch 1 ended after step 2\n"
            "step 3 epoch 2: 1 2 3\n");
  const SampleLog log = read_sample_log(path);
  EXPECT_EQ(log.header.dataset_size, 6);
  EXPECT_EQ(log.header.global_batch_size, 3);
  EXPECT_EQ(log.header.seed, 7u);
  ASSERT_EQ(log.steps.size(), 3u);
  EXPECT_EQ(log.steps[1].step, 2);
  EXPECT_EQ(log.steps[1].epoch, 1);
  EXPECT_EQ(log.steps[1].ids, (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(log.ended_epochs, (std::vector<int64_t>{1}));
  EXPECT_FALSE(log.cut_last_line);
}

TEST(SampleLog, AResumeCutsTheStepsAfterItsCheckpointAndSaysSo) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/samples.log";
  write_three_steps(path);
  // The checkpoint of step 2, at the end of epoch 1 (position: epoch 1 from 0, batch 0).
  {
    SampleLogWriter writer(path, kSix, TrainingPosition{1, 0, 2, 2, 3}, 3);
    writer.add_step(2, 3, {0, 4, 5});
  }
  EXPECT_EQ(testing::read_file(path),
            "# lockstep sample log 1: 6 samples, global batch 3, seed 7\n"
            "step 1 epoch 1: 0 2 4\n"
            "step 2 epoch 1: 1 3 5\n"
            "epoch 1 ended after step 2\n"
            "# resumed at step 2 on 3 workers\n"
            "step 3 epoch 2: 0 4 5\n");
  // The checkpoint of step 2 saved mid-epoch (epoch 0, batch 2): the epoch's end is written again.
  SampleLogWriter(path, kSix, TrainingPosition{0, 2, 2, 3, 3}, 1);
  EXPECT_EQ(testing::read_file(path),
            "# lockstep sample log 1: 6 samples, global batch 3, seed 7\n"
            "step 1 epoch 1: 0 2 4\n"
            "step 2 epoch 1: 1 3 5\n"
            "# resumed at step 2 on 1 worker\n");
}

TEST(SampleLog, ALogThatIsNotTheRunsIsOneLineNamingTheValues) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/samples.log";
  write_three_steps(path);
  const std::string written = testing::read_file(path);
  const TrainingPosition at_five{2, 1, 5, 2, 3};
  EXPECT_EQ(testing::data_error([&] { SampleLogWriter(path, kSix, at_five, 2); }),
            "the sample log " + path + " ends at step 3, but the checkpoint this run resumes from is of step 5: the " +
                "log is not this run's");
  EXPECT_EQ(testing::data_error([&] {
              SampleLogWriter(path, SampleLogHeader{6, 3, 8}, TrainingPosition{0, 1, 1, 2, 3}, 2);
            }),
            "the sample log " + path + " is of 6 samples, global batch 3, seed 7, but this run has 6 samples, " +
                "global batch 3, seed 8: resume with the same dataset, --global-batch-size and --seed");
  EXPECT_EQ(testing::data_error([&] { SampleLogWriter(dir.path() + "/none.log", kSix, at_five, 2); }),
            "the sample log " + dir.path() + "/none.log is not there, but the run resumes from the checkpoint of " +
                "step 5, so the log would miss steps 1 to 5: resume without --sample-log");
  EXPECT_EQ(testing::read_file(path), written) << "a refused resume leaves the log as it was";
}

TEST(SampleLog, TheAuditSaysEachEpochOnceOrNamesTheFirstSampleTwiceOrNever) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/samples.log";
  write_three_steps(path);
  SampleAudit audit = audit_sample_log(read_sample_log(path));
  EXPECT_TRUE(audit.every_sample_once);
  EXPECT_EQ(audit.lines, (std::vector<std::string>{
                             "epoch 1: every sample once (6 of 6 samples in steps 1 to 2)",
                             "epoch 2: in progress, 3 of 6 samples so far (steps 3 to 3), none twice",
                         }));

  std::ofstream(path, std::ios::app) << "step 4 epoch 2: 0 1 5\n";
  audit = audit_sample_log(read_sample_log(path));
  EXPECT_FALSE(audit.every_sample_once);
  EXPECT_EQ(audit.lines.back(), "epoch 2: sample 1 was trained twice, at step 3 and at step 4");

  {
    SampleLogWriter writer(path, kSix, TrainingPosition{}, 1);
    writer.add_step(1, 1, {0, 1, 2});
    writer.add_step(1, 2, {3, 5});
    writer.add_step(2, 3, {0, 1, 2});
  }
  audit = audit_sample_log(read_sample_log(path));
  EXPECT_EQ(audit.lines, (std::vector<std::string>{"epoch 1: sample 4 was never trained (5 of 6 samples in steps 1 to "
                                                   "2)"}));

  {
    SampleLogWriter writer(path, kSix, TrainingPosition{}, 1);
    writer.add_step(1, 1, {0, 1, 2});
    writer.add_step(1, 3, {3, 4, 5});
  }
  audit = audit_sample_log(read_sample_log(path));
  EXPECT_EQ(audit.lines, (std::vector<std::string>{"step 2 is missing from the log: step 3 follows step 1"}));
}

TEST(SampleLog, ALastLineCutByACrashIsLeftOutAndAnythingElseIsNamedByLine) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/samples.log";
  write_three_steps(path);
  std::ofstream(path, std::ios::app) << "step 4 epoch 2: 0 4";
  const SampleLog log = read_sample_log(path);
  EXPECT_TRUE(log.cut_last_line);
  EXPECT_EQ(log.steps.size(), 3u);

  std::ofstream(path, std::ios::app) << "\nstep five\n";
  EXPECT_EQ(testing::data_error([&] { read_sample_log(path); }),
            path + ", line 7 is neither a step (\"step S epoch E: ids\") nor an epoch's end: \"step five\"");
  std::ofstream(path) << "step 1 epoch 1: 0\n";
  EXPECT_EQ(testing::data_error([&] { read_sample_log(path); }),
            path + " is not a sample log: its first line is not \"# lockstep sample log\"");
}

}  // namespace
}  // namespace lockstep::train
