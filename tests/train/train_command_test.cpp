// `lockstep train` as a user runs it: resuming bit-exactly, resuming on another world size,
// refusing bad checkpoints, config files, progress on a terminal or a pipe, and the default
// job's accuracy.
#include <signal.h>
#include <sysexits.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/metrics_sink.h"
#include "lockstep/train/models.h"
#include "lockstep/train/trainer.h"
#include "support/pty_process.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/wait_for.h"
#include "support/examples.h"
#include "support/world.h"
#include "trained_steps.h"
#include "worker_processes.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;
using testing::TemporaryDirectory;
using testing::validation_lines;

// A small job: 512 training examples, so 8 steps an epoch on 2 workers with batch 32; 3
// epochs unless `extra` says otherwise.
std::vector<std::string> small_job(const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,    "train", "--limit",     "512", "--val-limit", "256",
                                      "--batch-size",   "32",    "--log-every", "4",   "--out",       out,
                                      "--warmup-steps", "4"};
  if (std::find(extra.begin(), extra.end(), "--epochs") == extra.end()) extra.insert(extra.end(), {"--epochs", "3"});
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

TEST(TrainCommand, ResumingARunStoppedInEpochTwoEndsWithTheSameParameters) {
  TemporaryDirectory dir;
  const auto whole = run_process(small_job(dir.path() + "/whole", {"-n", "2"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  const std::string out = dir.path() + "/interrupted";
  const auto first = run_process(small_job(out, {"-n", "2", "--stop-after-step", "11"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(contains(first.output, "stopped after step 11")) << first.output;
  const auto second = run_process(small_job(out, {"-n", "2", "--resume"}));
  ASSERT_EQ(second.exit_code, 0) << second.output;

  expect_equal_parameters(dir.path() + "/whole/checkpoints/step-0000000024.pt",
                          out + "/checkpoints/step-0000000024.pt");
  // The metrics file goes on where the first part left off.
  const auto records = read_json_lines(out + "/metrics.jsonl");
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().phase, "val");
  EXPECT_EQ(records.back().step, 24);
}

TEST(TrainCommand, ThreadsAndProcessesTrainToTheSameBits) {
  TemporaryDirectory dir;
  const auto processes =
      run_process(small_job(dir.path() + "/processes", {"-n", "2", "--epochs", "2", "--mode", "processes"}));
  ASSERT_EQ(processes.exit_code, 0) << processes.output;
  const auto threads =
      run_process(small_job(dir.path() + "/threads", {"-n", "2", "--epochs", "2", "--mode", "threads"}));
  ASSERT_EQ(threads.exit_code, 0) << threads.output;
  // Worker processes' lines come through the launcher, which prefixes them; replicas print their own.
  EXPECT_TRUE(contains(processes.output, "[rank 0] cnn on fashion-mnist")) << processes.output;
  EXPECT_FALSE(contains(threads.output, "[rank ")) << threads.output;
  EXPECT_TRUE(contains(threads.output, "on 2 workers")) << threads.output;
  expect_equal_parameters(dir.path() + "/processes/checkpoints/step-0000000016.pt",
                          dir.path() + "/threads/checkpoints/step-0000000016.pt");
  EXPECT_EQ(validation_lines(processes.output).size(), 2u) << processes.output;
  EXPECT_EQ(validation_lines(processes.output), validation_lines(threads.output));
  // Every logged loss, to every digit.
  const auto logged = [&](const std::string& run) {
    std::vector<std::pair<std::string, double>> losses;
    for (const auto& record : read_json_lines(dir.path() + "/" + run + "/metrics.jsonl")) {
      losses.emplace_back(record.phase + " " + std::to_string(record.step), record.value("loss"));
    }
    return losses;
  };
  EXPECT_EQ(logged("processes").size(), 6u);
  EXPECT_EQ(logged("processes"), logged("threads"));
}

// Waits until `run` has printed `part`; false when it ended or 60 s passed first.
bool wait_for_output(testing::ToolProcess& run, const std::string& part) {
  return testing::wait_for([&] { return contains(run.stdout_text(), part); });
}

// Slurm and Kubernetes send SIGTERM before they kill a job: every worker finishes the same
// step, its checkpoint is written, the job exits with status 75, and --resume goes on to
// the same bits as a run that was never stopped.
TEST(TrainCommand, SigtermSavesTheCurrentStepExitsWithSeventyFiveAndResumesBitExactly) {
  TemporaryDirectory dir;
  const auto whole = run_process(small_job(dir.path() + "/whole", {"-n", "2"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  for (const std::string mode : {"processes", "threads"}) {
    const std::string out = dir.path() + "/" + mode;
    testing::ToolProcess run(small_job(out, {"-n", "2", "--mode", mode}));
    ASSERT_TRUE(wait_for_output(run, "step 4/24")) << run.stdout_text() << run.stderr_text();
    kill(run.pid(), SIGTERM);  // the launcher, or the one process that holds the replicas
    ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(60)));
    EXPECT_EQ(run.exit_code(), EX_TEMPFAIL) << mode << "\n" << run.stdout_text() << run.stderr_text();
    const std::string text = run.stdout_text();
    const auto at = text.find("preempted: stopped after step ");
    ASSERT_NE(at, std::string::npos) << text;
    const int step = std::stoi(text.substr(at + 30));
    EXPECT_GE(step, 4);
    EXPECT_LT(step, 24) << text;
    char name[32];
    std::snprintf(name, sizeof name, "step-%010d.pt", step);
    EXPECT_TRUE(std::filesystem::exists(out + "/checkpoints/" + name)) << text;
    const auto resumed = run_process(small_job(out, {"-n", "2", "--mode", mode, "--resume"}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    expect_equal_parameters(dir.path() + "/whole/checkpoints/step-0000000024.pt",
                            out + "/checkpoints/step-0000000024.pt");
  }
}

// The worker processes a launcher started, in the order it started them.
// The newest validation loss a run logged.
double last_validation_loss(const std::string& out) {
  double loss = -1;
  for (const auto& record : read_json_lines(out + "/metrics.jsonl")) {
    if (record.phase == "val") loss = record.value("loss");
  }
  return loss;
}

// A worker SIGKILLed at a random step: every worker restarts from the newest checkpoint and
// the run ends with the parameters and validation loss of a run that was never interrupted;
// its sample log, cut back to that checkpoint, is the uninterrupted run's line for line.
TEST(TrainCommand, AWorkerKilledAtARandomStepRestartsAndEndsBitExact) {
  TemporaryDirectory dir;
  const auto whole =
      run_process(small_job(dir.path() + "/whole", {"-n", "2", "--checkpoint-every", "2", "--sample-log"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string out = dir.path() + "/killed";
  testing::ToolProcess run(
      small_job(out, {"-n", "2", "--max-restarts", "1", "--checkpoint-every", "2", "--sample-log"}));
  ASSERT_TRUE(wait_for_output(run, "step 4/24")) << run.stdout_text() << run.stderr_text();
  std::this_thread::sleep_for(std::chrono::milliseconds(std::random_device()() % 400));
  const auto workers = children_of(run.pid());
  ASSERT_EQ(workers.size(), 2u);
  kill(workers[1], SIGKILL);
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  EXPECT_TRUE(
      contains(run.stderr_text(), "lockstep run: restart 1 of 1: starting every worker afresh after rank 1 (pid " +
                                      std::to_string(workers[1]) + ") was killed by signal 9"))
      << run.stderr_text();
  expect_equal_parameters(dir.path() + "/whole/checkpoints/step-0000000024.pt",
                          out + "/checkpoints/step-0000000024.pt");
  EXPECT_EQ(last_validation_loss(out), last_validation_loss(dir.path() + "/whole"));
  EXPECT_EQ(trained_steps(out), trained_steps(dir.path() + "/whole"));
  const auto audit = run_process({LOCKSTEP_TOOL, "data", "audit", out});
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
}

// A worker that crashes prints every thread's stack before it dies, and the launcher names
// the signal: enough to find the code without a debugger on the machine.
TEST(TrainCommand, AWorkerThatCrashesPrintsItsStacks) {
  TemporaryDirectory dir;
  testing::ToolProcess run(small_job(dir.path() + "/crashed", {"-n", "2", "--mode", "processes"}));
  ASSERT_TRUE(wait_for_output(run, "step 4/24")) << run.stdout_text() << run.stderr_text();
  const auto workers = children_of(run.pid());
  ASSERT_EQ(workers.size(), 2u);
  kill(workers[1], SIGSEGV);
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(60)));
  EXPECT_NE(run.exit_code(), 0);
  const std::string err = run.stderr_text();
  EXPECT_TRUE(contains(err, "SIGSEGV(11), PID: " + std::to_string(workers[1]))) << err;
  EXPECT_TRUE(contains(err, "lockstep::")) << err;  // a frame of lockstep's own
  EXPECT_TRUE(contains(err, "rank 1 (pid " + std::to_string(workers[1]) + ") was killed by signal 11")) << err;
}

// A worker that stops (SIGSTOP) is named as hung within the heartbeat timeout plus 10 s; the
// job restarts when restarts are left and ends with status 124 otherwise.
TEST(TrainCommand, AStoppedWorkerIsNamedAsHungThenRestartedOrTheJobEnds) {
  TemporaryDirectory dir;
  for (const std::string restarts : {"1", "0"}) {
    const std::string out = dir.path() + "/restarts-" + restarts;
    testing::ToolProcess run(small_job(out, {"-n", "2", "--mode", "processes", "--max-restarts", restarts,
                                             "--heartbeat-timeout", "2", "--checkpoint-every", "2"}));
    ASSERT_TRUE(wait_for_output(run, "step 4/24")) << run.stdout_text() << run.stderr_text();
    const auto workers = children_of(run.pid());
    ASSERT_EQ(workers.size(), 2u);
    const auto stopped = std::chrono::steady_clock::now();
    kill(workers[1], SIGSTOP);
    const std::string named = "rank 1 (pid " + std::to_string(workers[1]) + ") missed its heartbeats for 2 s";
    while (!contains(run.stderr_text(), named) &&
           std::chrono::steady_clock::now() - stopped < std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(12)) << run.stderr_text();
    ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
    if (restarts == "1") {
      EXPECT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
      EXPECT_TRUE(contains(run.stderr_text(), "restart 1 of 1: starting every worker afresh after " + named))
          << run.stderr_text();
      EXPECT_TRUE(std::filesystem::exists(out + "/checkpoints/step-0000000024.pt"));
    } else {
      EXPECT_EQ(run.exit_code(), 124) << run.stdout_text() << run.stderr_text();
    }
  }
}

// SIGUSR1 to the launcher reaches every worker: a checkpoint after the next step, and on.
TEST(TrainCommand, SigusrOneWritesACheckpointAndTrainingGoesOn) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/run";
  // Long enough that the signal lands before the end however loaded the machine is.
  testing::ToolProcess run(small_job(out, {"-n", "2", "--mode", "processes", "--keep", "100", "--epochs", "40"}));
  ASSERT_TRUE(wait_for_output(run, "step 4/320")) << run.stdout_text() << run.stderr_text();
  kill(run.pid(), SIGUSR1);
  const std::string wrote = "that SIGUSR1 asked for; training goes on";
  for (int i = 0; i < 600 && !contains(run.stderr_text(), wrote); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(contains(run.stderr_text(), wrote)) << run.stdout_text() << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "passing it on to the workers")) << run.stderr_text();
  const auto written = testing::numbers_on_lines(run.stderr_text(), "(the checkpoint of step )([0-9]+)");
  ASSERT_EQ(written.size(), 1u) << run.stderr_text();
  char name[40];
  std::snprintf(name, sizeof name, "step-%010lld.pt", static_cast<long long>(written[0]));
  EXPECT_TRUE(std::filesystem::exists(out + "/checkpoints/" + name)) << name;

  kill(run.pid(), SIGTERM);  // it went on training; end it as a scheduler would
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(60)));
  EXPECT_EQ(run.exit_code(), EX_TEMPFAIL) << run.stdout_text() << run.stderr_text();
  const auto stopped = testing::numbers_on_lines(run.stdout_text(), "(stopped after step )([0-9]+)");
  ASSERT_EQ(stopped.size(), 1u) << run.stdout_text();
  EXPECT_GT(stopped[0], written[0]);
}

// Worker processes keep freed memory for their next step, as the start-up line says, unless
// turned off or the user chose an allocator's settings of their own.
TEST(TrainCommand, WorkerProcessesKeepFreedMemoryUnlessRefusedOrChosen) {
  TemporaryDirectory dir;
  const auto start = [&](const std::string& name, std::vector<std::string> extra, const testing::Env& environment) {
    extra.insert(extra.end(), {"-n", "2", "--mode", "processes", "--epochs", "1", "--stop-after-step", "1"});
    const auto ran = run_process(small_job(dir.path() + "/" + name, extra), environment);
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    return ran.output;
  };
  EXPECT_TRUE(contains(start("tuned", {}, {}), "2 workers (processes, malloc keeps freed memory) on the CPU"));
  EXPECT_TRUE(contains(start("refused", {"--no-malloc-tuning"}, {}), "2 workers (processes) on the CPU"));
  EXPECT_TRUE(contains(start("chosen", {}, {{"MALLOC_TOP_PAD_", "1048576"}}), "2 workers (processes) on the CPU"));
}

TEST(TrainCommand, ACheckpointOfTwoWorkersContinuesOnOneFromTheEpochStart) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/run";
  ASSERT_EQ(run_process(small_job(out, {"-n", "2", "--stop-after-step", "11"})).exit_code, 0);
  const auto resumed = run_process(small_job(out, {"-n", "1", "--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  // Step 11 was in epoch 2, which restarts: 2 epochs of 16 steps on one worker follow.
  EXPECT_TRUE(std::filesystem::exists(out + "/checkpoints/step-0000000043.pt")) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, out + " trained on 2 workers without --global-batch-size: on 1 each step "
                                             "trains 32 examples, and the epoch it stopped in starts again"))
      << resumed.output;
}

// With --global-batch-size every step trains the same samples on 1, 2 or 3 workers, threads
// or processes, so the parameters agree to float rounding; stopped mid-epoch on 2 workers
// and resumed on 3, the run goes on from the same step, not from the epoch's start.
TEST(TrainCommand, AGlobalBatchTrainsAlikeOnOneTwoAndThreeWorkersAndResumesOnAnother) {
  TemporaryDirectory dir;
  const auto job = [&](const std::string& name, int workers, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"-n", std::to_string(workers), "--global-batch-size", "48", "--epochs", "1",
                               "--checkpoint-every", "5", "--keep", "5"});
    return run_process(small_job(dir.path() + "/" + name, extra));
  };
  for (const std::string mode : {"threads", "processes"}) {
    for (const int workers : {1, 2, 3}) {
      const auto run = job(mode + "-" + std::to_string(workers), workers, {"--mode", mode, "--sample-log"});
      ASSERT_EQ(run.exit_code, 0) << run.output;
    }
  }
  // 512 examples: 10 steps of 48 and one of 32.
  const std::string fifth = "/checkpoints/step-0000000005.pt", last = "/checkpoints/step-0000000011.pt";
  const std::string one = dir.path() + "/threads-1";
  ASSERT_TRUE(contains(trained_steps(one), "step 11 epoch 1: ")) << trained_steps(one);
  for (const std::string run : {"threads-2", "threads-3", "processes-1", "processes-2", "processes-3"}) {
    EXPECT_EQ(trained_steps(dir.path() + "/" + run), trained_steps(one)) << run;
    expect_close_parameters(one + fifth, dir.path() + "/" + run + fifth);
  }
  expect_close_parameters(one + last, dir.path() + "/threads-3" + last);

  const auto stopped = job("moved", 2, {"--stop-after-step", "5"});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  const auto resumed = job("moved", 3, {"--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_close_parameters(dir.path() + "/threads-3" + last, dir.path() + "/moved" + last);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/moved/checkpoints/step-0000000016.pt"))
      << "the epoch in progress went on from step 5 rather than restarting";
  // The same with the optimizer state sharded (ZeRO-1): its shards of 2 workers are
  // repartitioned over 3.
  ASSERT_EQ(job("sharded", 2, {"--zero", "1", "--stop-after-step", "5"}).exit_code, 0);
  const auto sharded = job("sharded", 3, {"--zero", "1", "--resume"});
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  expect_close_parameters(dir.path() + "/threads-3" + last, dir.path() + "/sharded" + last);

  // Another global batch or dataset is refused by the run's config.toml, and by the
  // checkpoint itself in a run folder without one (from before runs kept their settings).
  const std::string moved = dir.path() + "/moved";
  const auto other_batch = [&] {
    return run_process(small_job(moved, {"-n", "1", "--global-batch-size", "32", "--epochs", "1", "--resume"}));
  };
  const auto other_data = [&] {
    std::vector<std::string> fewer_examples =
        small_job(moved, {"-n", "1", "--global-batch-size", "48", "--epochs", "1", "--resume"});
    *(std::find(fewer_examples.begin(), fewer_examples.end(), "--limit") + 1) = "480";
    return run_process(fewer_examples);
  };
  for (const auto& [refused, expected] :
       {std::pair{other_batch(), "this run trains with global_batch_size = 48, not --global-batch-size 32"},
        std::pair{other_data(), "this run trains with limit = 512, not --limit 480"}}) {
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_TRUE(contains(refused.output, moved + "/config.toml:")) << refused.output;
    EXPECT_TRUE(contains(refused.output, expected)) << refused.output;
  }
  std::filesystem::remove(moved + "/config.toml");
  for (const auto& [refused, expected] :
       {std::pair{other_batch(), "was trained with global batch size 48, but this run has 32"},
        std::pair{other_data(), "was trained on a dataset of 512 samples, but this run's has 480"}}) {
    EXPECT_NE(refused.exit_code, 0) << refused.output;
    EXPECT_TRUE(contains(refused.output, expected)) << refused.output;
  }
}

TEST(TrainCommand, ABadCheckpointIsRefusedAndNothingIsOverwritten) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/run";
  ASSERT_EQ(run_process(small_job(out, {"-n", "1"})).exit_code, 0);
  const std::string latest = CheckpointFolder(out + "/checkpoints", 3).latest();
  ASSERT_FALSE(latest.empty());

  // Another model is refused by the run's config.toml, and by the checkpoint itself in a run
  // folder without one (from before runs kept their settings).
  const auto other_model = [&] { return run_process(small_job(out, {"-n", "1", "--model", "mlp", "--resume"})); };
  const auto refused = other_model();
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, out + "/config.toml:4: this run trains with model = 'cnn', not --model 'mlp'"))
      << refused.output;
  std::filesystem::remove(out + "/config.toml");
  const auto older = other_model();
  EXPECT_NE(older.exit_code, 0) << older.output;
  EXPECT_TRUE(contains(older.output, latest + " (saved from model 'cnn')")) << older.output;

  {
    std::fstream file(latest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(200);
    file << "garbage garbage garbage garbage";
  }
  const auto listing = CheckpointFolder(out + "/checkpoints", 3).list();
  const auto corrupt = run_process(small_job(out, {"-n", "1", "--resume"}));
  EXPECT_NE(corrupt.exit_code, 0) << corrupt.output;
  EXPECT_TRUE(contains(corrupt.output, latest + ": not a readable checkpoint")) << corrupt.output;
  EXPECT_EQ(CheckpointFolder(out + "/checkpoints", 3).list(), listing);

  const auto fresh_over_old = run_process(small_job(out, {"-n", "1"}));
  EXPECT_EQ(fresh_over_old.exit_code, 2) << fresh_over_old.output;
  EXPECT_TRUE(contains(fresh_over_old.output, out + " already holds a run's checkpoints; add --resume"))
      << fresh_over_old.output;
}

TEST(TrainCommand, JoinsALaunchThatExistsInsteadOfStartingWorkers) {
  TemporaryDirectory dir;
  auto argv = testing::mpirun(2);
  const auto job = small_job(dir.path() + "/run", {"--epochs", "1"});
  argv.insert(argv.end(), job.begin(), job.end());
  const auto run = run_process(argv, testing::mpirun_env(), std::chrono::seconds(120));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Two ranks of 256 examples in batches of 32: 8 steps, so both mpirun processes joined one job.
  EXPECT_TRUE(contains(run.output, "after 1 epoch on 2 workers")) << run.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/run/checkpoints/step-0000000008.pt")) << run.output;

  const auto mismatch =
      run_process({"/bin/sh", "-c", "RANK=0 WORLD_SIZE=1 exec '" LOCKSTEP_TOOL "' train -n 3 --limit 64"});
  EXPECT_NE(mismatch.exit_code, 0) << mismatch.output;
  EXPECT_TRUE(contains(mismatch.output, "-n 3 does not match this launch's world size 1")) << mismatch.output;
}

TEST(TrainCommand, AConfigFileSetsWhatTheFlagsDoNot) {
  TemporaryDirectory dir;
  const std::string config = dir.path() + "/run.toml";
  std::ofstream(config) << "epochs = 1\nbatch_size = 64\nlimit = 256\nval_limit = 128\nlr = 0.01\n";
  const auto run = run_process(
      {LOCKSTEP_TOOL, "train", "--config", config, "-n", "1", "--batch-size", "32", "--out", dir.path() + "/run"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // 256 examples in batches of 32 (the flag beats the file's 64), one epoch (from the file).
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/run/checkpoints/step-0000000008.pt")) << run.output;

  std::ofstream(config) << "epochs = 1\nlearning_rate = 0.1\n";
  const auto unknown = run_process({LOCKSTEP_TOOL, "train", "--config", config});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_TRUE(contains(unknown.output, config + ":2: unknown setting 'learning_rate'")) << unknown.output;
}

TEST(Examples, ImageNetResNetTrainsOnFashionMnistExportedInImageNetsLayout) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(IMAGENET_RESNET);
  TemporaryDirectory dir;
  const auto exported =
      run_process({LOCKSTEP_TOOL, "data", "export-imagenet-layout", "--out", dir.path(), "--limit", "192"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto run = run_process({LOCKSTEP_TOOL, "run", "-n", "2", "--", IMAGENET_RESNET, "--data", dir.path(),
                                "--epochs", "1", "--batch-size", "48", "--limit", "192", "--val-limit", "96"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "[rank 0] epoch 1/1 step 2/2")) << run.output;
  EXPECT_TRUE(contains(run.output, "[rank 0] resnet34: val top-1 ")) << run.output;
}

TEST(Examples, ReplicasTrainsOnFashionMnistExportedInImageNetsLayout) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(REPLICAS);
  TemporaryDirectory dir;
  const auto exported =
      run_process({LOCKSTEP_TOOL, "data", "export-imagenet-layout", "--out", dir.path(), "--limit", "192"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto run = run_process({REPLICAS, "--data", dir.path(), "-n", "2", "--epochs", "1", "--batch-size", "48",
                                "--limit", "192", "--val-limit", "96"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "epoch 1/1 step 2/2")) << run.output;
  EXPECT_TRUE(contains(run.output, "resnet34 on 2 replicas: val top-1 ")) << run.output;
}

// 1024 examples on 2 workers in batches of 32: 16 steps in one epoch, progress every 2.
std::vector<std::string> progress_job(const std::string& out, const std::string& mode) {
  return {LOCKSTEP_TOOL, "train",       "--limit", "1024", "--val-limit", "256",    "--epochs", "1",     "--batch-size",
          "32",          "--log-every", "2",       "-n",   "2",           "--mode", mode,       "--out", out};
}

// How many pieces of `output` ending in '\r' hold a whole bar: ETA and samples/s on one line.
int bar_updates(const std::string& output) {
  int updates = 0;
  size_t start = 0;
  for (size_t end = output.find('\r'); end != std::string::npos; start = end + 1, end = output.find('\r', start)) {
    const std::string piece = output.substr(start, end - start);
    updates += contains(piece, "ETA") && contains(piece, "samples/s") && !contains(piece, "\n");
  }
  return updates;
}

// On a terminal, worker processes' progress reaches it through the launcher's pipes, which
// must still show it as one bar redrawn in place, and without the "[rank 0] " prefix.
TEST(TrainCommand, OnATerminalProgressIsOneBarRedrawnInPlaceInBothModes) {
  TemporaryDirectory dir;
  for (const std::string mode : {"processes", "threads"}) {
    const auto run = testing::run_in_terminal(progress_job(dir.path() + "/" + mode, mode));
    ASSERT_EQ(run.exit_code, 0) << mode << "\n" << run.output;
    EXPECT_GE(bar_updates(run.output), 3) << mode << "\n" << run.output;
    EXPECT_FALSE(contains(run.output, "epoch 1/1 step ")) << mode << "\n" << run.output;
    EXPECT_FALSE(contains(run.output, "[rank 0] epoch 1/1 [")) << mode << "\n" << run.output;
    // The bar's last state stays as a line of its own, and validation comes below it.
    const std::string prefix = mode == "processes" ? "[rank 0] " : "";
    EXPECT_TRUE(contains(run.output, "\r\n" + prefix + "epoch 1/1 val loss ")) << mode << "\n" << run.output;
  }
}

// mpirun gives its ranks a pty even when its own output goes to a file: a rank that no
// lockstep launcher told of a terminal writes plain lines.
TEST(TrainCommand, ARankOfAnotherLaunchWritesPlainLinesEvenOnATerminal) {
  TemporaryDirectory dir;
  const auto run = testing::run_in_terminal({"/bin/sh", "-c",
                                             "RANK=0 WORLD_SIZE=1 exec '" LOCKSTEP_TOOL
                                             "' train --limit 256 --val-limit 64 --epochs 1 "
                                             "--batch-size 32 --log-every 2 --out '" +
                                                 dir.path() + "/run'"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(contains(run.output, "\r")) << run.output;
  EXPECT_TRUE(contains(run.output, "epoch 1/1 step 8/8 ETA 0s")) << run.output;
}

// CI logs, pipes and files get plain lines: not one carriage return.
TEST(TrainCommand, ThroughAPipeOutputIsPlainLinesWithoutCarriageReturnsInBothModes) {
  TemporaryDirectory dir;
  for (const std::string mode : {"processes", "threads"}) {
    const auto run = run_process(progress_job(dir.path() + "/" + mode, mode));
    ASSERT_EQ(run.exit_code, 0) << mode << "\n" << run.output;
    EXPECT_FALSE(contains(run.output, "\r")) << mode << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, "epoch 1/1 step 16/16 ETA 0s")) << mode << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, "epoch 1/1 val loss ")) << mode << "\n" << run.output;
  }
}

// The README's `make run`: no arguments at all. Fashion-MNIST's benchmark lists 91.6% for
// the TensorFlow tutorial's two-convolution network; this must reach 91% in its 5 epochs.
TEST(TrainCommand, TheDefaultJobReachesNinetyOnePercentInFiveEpochs) {
  TemporaryDirectory dir;
  const auto run = run_process({"/bin/sh", "-c", "cd '" + dir.path() + "' && exec '" LOCKSTEP_TOOL "' train"}, {},
                               std::chrono::seconds(1500));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto at = run.output.find("validation loss ");
  ASSERT_NE(at, std::string::npos) << run.output;
  const auto top1 = run.output.find(", top-1 ", at);
  ASSERT_NE(top1, std::string::npos) << run.output;
  EXPECT_TRUE(contains(run.output, "cnn on fashion-mnist after 5 epochs on 2 workers in ")) << run.output;
  EXPECT_TRUE(contains(run.output.substr(at), "(test split); run in runs/fashion-mnist-cnn-")) << run.output;
  const double accuracy = std::stod(run.output.substr(top1 + 8));
  EXPECT_GE(accuracy, 91.0) << run.output;
  std::cout << run.output.substr(run.output.rfind("cnn on")) << std::flush;
}

}  // namespace
}  // namespace lockstep::train
