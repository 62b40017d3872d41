// Models defined in Python: TorchScript files trained by DistributedDataParallel and by
// `lockstep train --model FILE.pt`, and weights exported back for Python's torch.load.
#include <filesystem>
#include <functional>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "lockstep/comm/replicas.h"
#include "lockstep/ddp/distributed_data_parallel.h"
#include "lockstep/ddp/scripted_module.h"
#include "lockstep/train/checkpoint.h"
#include "support/network_hosts.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "weight_lines.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::lines_of;
using testing::run_process;
using testing::TemporaryDirectory;

// tests/train/make_scripted_model.py OUT [ARGS]: a CNN (or --mlp) for 28×28 gray images.
std::string scripted_model(const std::string& out, std::vector<std::string> arguments = {}) {
  std::vector<std::string> command = {PYTHON, std::string(SCRIPTS) + "/make_scripted_model.py", out};
  command.insert(command.end(), arguments.begin(), arguments.end());
  const auto made = run_process(command);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  return out;
}

std::vector<std::string> small_run(const std::string& model, const std::string& out) {
  return {LOCKSTEP_TOOL, "train", "--model",     model, "-n",           "2",  "--epochs", "1",
          "--limit",     "512",   "--val-limit", "256", "--batch-size", "32", "--out",    out};
}

TEST(ScriptedModule, HoldsTheScriptedTensorsUnderPythonsNames) {
  TemporaryDirectory dir;
  auto script = torch::jit::load(scripted_model(dir.path() + "/cnn.pt"));
  ScriptedModule module(script);
  std::vector<std::string> names;
  for (const auto& item : module->named_parameters()) names.push_back(item.key());
  EXPECT_EQ(names,
            (std::vector<std::string>{"features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias",
                                      "features.4.weight", "features.4.bias", "features.5.weight", "features.5.bias",
                                      "classifier.weight", "classifier.bias"}));
  EXPECT_EQ(module->named_buffers().size(), 6u);  // running mean, variance and count of 2 BatchNorms
  // The same tensors, not copies: a change through one is seen through the other.
  torch::NoGradGuard no_grad;
  module->named_parameters()["classifier.bias"].fill_(3);
  EXPECT_TRUE(torch::equal(script.attr("classifier").toModule().attr("bias").toTensor(), torch::full({10}, 3.0)));
  module->eval();
  EXPECT_FALSE(script.is_training());
  module->train();
  EXPECT_TRUE(script.is_training());
}

TEST(ScriptedModule, DdpOnTwoReplicasGivesTheGradientOfTheCombinedBatch) {
  TemporaryDirectory dir;
  const std::string file = scripted_model(dir.path() + "/mlp.pt", {"--mlp"});
  torch::manual_seed(1);
  const auto input = torch::randn({8, 1, 28, 28});
  const auto target = torch::randint(10, {8});

  auto whole = torch::jit::load(file);
  torch::nn::functional::cross_entropy(whole.forward({input}).toTensor(), target).backward();
  std::vector<torch::Tensor> expected;
  for (const auto& parameter : whole.parameters()) expected.push_back(parameter.grad());

  run_replicas(2, [&](ProcessGroup group) {
    auto script = torch::jit::load(file);
    DistributedDataParallel ddp(script);
    const auto mine = torch::indexing::Slice(4 * group.rank(), 4 * group.rank() + 4);
    torch::nn::functional::cross_entropy(script.forward({input.index({mine})}).toTensor(), target.index({mine}))
        .backward();
    size_t i = 0;
    for (const auto& parameter : script.parameters()) {  // the scripted module's own tensors
      EXPECT_TRUE(torch::allclose(parameter.grad(), expected[i], 1e-5, 1e-7))
          << "rank " << group.rank() << " parameter " << i;
      ++i;
    }
  });
}

// Stopped in the second epoch, then resumed.
TEST(ScriptedModel, APythonCnnReaches89PercentInTwoEpochsAndResumesBitExactly) {
  TemporaryDirectory dir;
  const std::string model = scripted_model(dir.path() + "/cnn.pt");
  expect_accurate_and_resumed_bit_exactly({LOCKSTEP_TOOL, "train", "--model", model, "-n", "2", "--epochs", "2"}, 89.0,
                                          700);
}

// A model whose gradients arrive in the reverse of DistributedDataParallel's first guess,
// with buckets small enough that the ones rebuilt after the first step differ from the
// first: a resumed run must reduce in the rebuilt buckets from its first step on (a ring
// sums each element in an order its place in the bucket decides), and end with the bits of
// a run never stopped. A large constant rate carries a gradient's last bit into the weights.
std::vector<std::string> reordered_job(const std::string& model, const std::string& out) {
  return {"train", "--model",      model,      "--epochs",        "1",    "--limit", "960", "--val-limit",
          "64",    "--batch-size", "32",       "--bucket-cap-mb", "0.01", "--lr",    "0.2", "--warmup-steps",
          "0",     "--schedule",   "constant", "--out",           out};
}

// `run(out, extra)` runs the job into DIR/out: whole, then stopped after `stop_step` and
// resumed; the two must end with the same weights.
void expect_resumed_like_whole(const std::string& dir, int stop_step,
                               const std::function<void(const std::string&, const std::vector<std::string>&)>& run) {
  run("whole", {});
  run("interrupted", {"--stop-after-step", std::to_string(stop_step)});
  run("interrupted", {"--resume"});
  expect_same_weights(checkpoint_weights(newest_checkpoint(dir + "/whole")),
                      checkpoint_weights(newest_checkpoint(dir + "/interrupted")));
}

TEST(ResumedRun, ReducesInTheRebuiltBucketsOnThreeProcessesOverGloo) {
  TemporaryDirectory dir;
  const std::string model = scripted_model(dir.path() + "/reordered.pt", {"--reordered"});
  auto run = [&](const std::string& out, const std::vector<std::string>& extra) {
    std::vector<std::string> command = {LOCKSTEP_TOOL};
    for (const auto& part : reordered_job(model, dir.path() + "/" + out)) command.push_back(part);
    command.insert(command.end(), {"-n", "3", "--mode", "processes"});
    command.insert(command.end(), extra.begin(), extra.end());
    const auto finished = run_process(command, {{"LOCKSTEP_SHM", "0"}}, std::chrono::seconds(300));
    EXPECT_EQ(finished.exit_code, 0) << finished.output;
  };
  expect_resumed_like_whole(dir.path(), 4, run);
}

TEST(ResumedRun, ReducesInTheRebuiltBucketsOnTwoNamespacedHostsOfTwo) {
  testing::NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  TemporaryDirectory dir;
  const std::string model = scripted_model(dir.path() + "/reordered.pt", {"--reordered"});
  auto run = [&](const std::string& out, const std::vector<std::string>& extra) {
    const std::string port = std::to_string(testing::free_port());
    std::vector<std::unique_ptr<testing::ToolProcess>> nodes;
    for (int host = 0; host < 2; ++host) {
      std::vector<std::string> command = {LOCKSTEP_TOOL,
                                          "run",
                                          "-n",
                                          "2",
                                          "--nnodes",
                                          "2",
                                          "--node-rank",
                                          std::to_string(host),
                                          "--master-addr",
                                          hosts.address(0),
                                          "--master-port",
                                          port,
                                          "--",
                                          LOCKSTEP_TOOL};
      for (const auto& part : reordered_job(model, dir.path() + "/" + out)) command.push_back(part);
      command.insert(command.end(), extra.begin(), extra.end());
      nodes.push_back(std::make_unique<testing::ToolProcess>(hosts.on(host, command),
                                                             std::vector<std::string>{"LOCKSTEP_TIMEOUT=60"}));
    }
    for (auto& node : nodes) {
      ASSERT_TRUE(node->wait_for_exit(std::chrono::seconds(300)));
      EXPECT_EQ(node->exit_code(), 0) << node->stdout_text() << node->stderr_text();
    }
  };
  expect_resumed_like_whole(dir.path(), 3, run);
}

TEST(Export, PythonLoadsTheStateDictOfABuiltInModelExactly) {
  TemporaryDirectory dir;
  const auto trained = run_process(small_run("cnn", dir.path() + "/run"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto exported =
      run_process({LOCKSTEP_TOOL, "export", dir.path() + "/run", "--out", dir.path() + "/weights.pt"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(contains(exported.output, "the state dict")) << exported.output;
  expect_same_weights(python_weights("state-dict", dir.path() + "/weights.pt"),
                      checkpoint_weights(newest_checkpoint(dir.path() + "/run")));
}

TEST(Export, PythonLoadsTheTrainedScriptedModuleExactly) {
  TemporaryDirectory dir;
  const std::string model = scripted_model(dir.path() + "/cnn.pt");
  const auto trained = run_process(small_run(model, dir.path() + "/run"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto exported =
      run_process({LOCKSTEP_TOOL, "export", dir.path() + "/run", "--out", dir.path() + "/trained.pt"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(contains(exported.output, "the TorchScript module")) << exported.output;
  const auto checkpoint = checkpoint_weights(newest_checkpoint(dir.path() + "/run"));
  expect_same_weights(python_weights("script", dir.path() + "/trained.pt"), checkpoint);
  EXPECT_NE(python_weights("script", model), checkpoint) << "the export holds the untrained weights";

  // --state-dict gives the same tensors as a plain dict.
  const auto as_dict =
      run_process({LOCKSTEP_TOOL, "export", dir.path() + "/run", "--out", dir.path() + "/dict.pt", "--state-dict"});
  ASSERT_EQ(as_dict.exit_code, 0) << as_dict.output;
  expect_same_weights(python_weights("state-dict", dir.path() + "/dict.pt"), checkpoint);
}

TEST(Export, AFolderWithoutCheckpointsIsOneLineNamingIt) {
  TemporaryDirectory dir;
  const auto exported = run_process({LOCKSTEP_TOOL, "export", dir.path(), "--out", dir.path() + "/weights.pt"});
  EXPECT_NE(exported.exit_code, 0);
  EXPECT_EQ(lines_of(exported.output).size(), 1u) << exported.output;
  EXPECT_TRUE(contains(exported.output, dir.path() + " has no checkpoints")) << exported.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/weights.pt"));
}

}  // namespace
}  // namespace lockstep::train
