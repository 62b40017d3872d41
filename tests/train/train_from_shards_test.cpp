// `lockstep train` on Fashion-MNIST packed into shards, from local disk and from a real
// nginx over HTTPS: the same validation losses to every digit in processes and threads
// modes, an exact resume mid-epoch, the same result through resets and 503s, and a folder
// URL without an index refused in one line by the launching process before any worker starts.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "packed_fashion.h"
#include "support/fault_proxy.h"
#include "support/nginx_server.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "weight_lines.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;
using testing::TemporaryDirectory;
using testing::validation_lines;

// 512 training examples (about 5 shards: each of 2 workers walks its own), 8 steps an epoch,
// 3 epochs unless `extra` says otherwise.
std::vector<std::string> shards_job(const PackedFashion& data, const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,
                                      "train",
                                      "--data-toml",
                                      data.registry(),
                                      "--dataset",
                                      "fashion-shards",
                                      "--limit",
                                      "512",
                                      "--val-limit",
                                      "256",
                                      "--batch-size",
                                      "32",
                                      "--log-every",
                                      "4",
                                      "--warmup-steps",
                                      "4",
                                      "-n",
                                      "2",
                                      "--out",
                                      out};
  if (std::find(extra.begin(), extra.end(), "--epochs") == extra.end()) extra.insert(extra.end(), {"--epochs", "3"});
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// The same model tensors, bit for bit, in two checkpoints.
void expect_equal_weights(const std::string& a, const std::string& b) {
  expect_same_weights(checkpoint_weights(a), checkpoint_weights(b));
}

TEST(TrainFromShards, FromDiskAndFromNginxOverHttpsTheLossesAreTheSameInBothModesAndAResumeIsExact) {
  PackedFashion data;
  testing::NginxServer https(data.folder.path(), true);
  ASSERT_TRUE(https.available()) << https.why_not();
  const std::string remote = "fashion-shards=" + https.url() + "/shards";
  const std::string dir = data.folder.path();
  // The server's certificate trusted through the registry entry's ca_file.
  std::ofstream(data.registry(), std::ios::app) << "ca_file = \"" << https.certificate() << "\"\n";

  const auto local = run_process(shards_job(data, dir + "/local", {"--mode", "processes"}));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  ASSERT_EQ(validation_lines(local.output).size(), 3u) << local.output;
  for (const std::string mode : {"processes", "threads"}) {
    const auto over_https =
        run_process(shards_job(data, dir + "/https-" + mode, {"--mode", mode, "--data-path", remote}));
    ASSERT_EQ(over_https.exit_code, 0) << over_https.output;
    EXPECT_EQ(validation_lines(over_https.output), validation_lines(local.output)) << mode;
    expect_equal_weights(dir + "/local/checkpoints/step-0000000024.pt",
                         dir + "/https-" + mode + "/checkpoints/step-0000000024.pt");
  }

  // Stopped mid-epoch (step 11 of 8-step epochs) and resumed, over HTTPS.
  const std::string out = dir + "/resumed";
  const auto first = run_process(shards_job(data, out, {"--data-path", remote, "--stop-after-step", "11"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(contains(first.output, "stopped after step 11")) << first.output;
  const auto second = run_process(shards_job(data, out, {"--data-path", remote, "--resume"}));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  expect_equal_weights(dir + "/local/checkpoints/step-0000000024.pt", out + "/checkpoints/step-0000000024.pt");
}

// Connections closed mid-body and 503 answers in front of nginx: the readers retry, and the
// job ends with the losses of the job read from disk.
TEST(TrainFromShards, ThroughResetsAnd503sTheJobEndsWithTheLossesReadFromDisk) {
  PackedFashion data;
  testing::NginxServer http(data.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  const std::string dir = data.folder.path();
  const auto local = run_process(shards_job(data, dir + "/local", {"--epochs", "1"}));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  for (const testing::Fault fault : {testing::Fault::kCloseMidBody, testing::Fault::kAnswer503}) {
    testing::FaultProxy proxy(http.port(), fault, 6);
    const std::string out = dir + "/proxied-" + std::to_string(static_cast<int>(fault));
    const auto proxied = run_process(
        shards_job(data, out, {"--epochs", "1", "--data-path", "fashion-shards=" + proxy.url() + "/shards"}));
    ASSERT_EQ(proxied.exit_code, 0) << proxied.output;
    EXPECT_GT(proxy.requests(), 6);
    EXPECT_EQ(validation_lines(proxied.output), validation_lines(local.output));
    expect_equal_weights(dir + "/local/checkpoints/step-0000000008.pt", out + "/checkpoints/step-0000000008.pt");
  }
}

TEST(TrainFromShards, AFolderUrlWithoutAnIndexIsOneLineFromTheLauncherBeforeAnyWorkerStarts) {
  PackedFashion data;
  testing::NginxServer http(data.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  const auto run = run_process(
      shards_job(data, data.folder.path() + "/out", {"--data-path", "fashion-shards=" + http.url() + "/nowhere/"}));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "cannot read " + http.url() + "/nowhere/train.index.json: HTTP 404")) << run.output;
  EXPECT_EQ(testing::count_lines(run.output), 1u) << run.output;
  EXPECT_FALSE(contains(run.output, "[rank")) << run.output;
}

}  // namespace
}  // namespace lockstep::train
