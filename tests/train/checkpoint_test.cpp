// Checkpoint files: what they hold, keeping the newest K, refusing corrupt files and other
// models without changing anything, and surviving SIGKILL while one is written.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/models.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::TemporaryDirectory;

struct Trained {
  torch::nn::Sequential model;
  std::shared_ptr<torch::optim::SGD> optimizer;
};

Trained cnn(uint64_t seed) {
  torch::manual_seed(seed);
  auto model = make_model("cnn", ModelOptions().in_channels(1).num_classes(10).image_size(28));
  auto optimizer =
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  // One step, so that the optimizer has momentum buffers to save.
  torch::nn::functional::cross_entropy(model->forward(torch::rand({4, 1, 28, 28})), torch::tensor({1, 2, 3, 4}))
      .backward();
  optimizer->step();
  return {model, optimizer};
}

bool same_parameters(const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!torch::equal(pa[i], pb[i])) return false;
  }
  return true;
}

std::string file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

TEST(Checkpoint, RoundTripsModelOptimizerAndPosition) {
  TemporaryDirectory dir;
  const Trained saved = cnn(1);
  const CheckpointFolder folder(dir.path(), 2);
  CheckpointState state{{3, 7, 150, 2}, "cnn", torch::arange(6, torch::kUInt8).view({2, 3})};
  const std::string path = folder.save(*saved.model, *saved.optimizer, state);
  EXPECT_EQ(path, dir.path() + "/step-0000000150.pt");

  Trained loaded = cnn(2);
  ASSERT_FALSE(same_parameters(*saved.model, *loaded.model));
  const CheckpointState back = load_checkpoint(path, *loaded.model, *loaded.optimizer);
  EXPECT_TRUE(same_parameters(*saved.model, *loaded.model));
  EXPECT_EQ(back.position.epoch, 3);
  EXPECT_EQ(back.position.batch, 7);
  EXPECT_EQ(back.position.step, 150);
  EXPECT_EQ(back.position.world_size, 2);
  EXPECT_EQ(back.model_name, "cnn");
  EXPECT_TRUE(torch::equal(back.rng_states, state.rng_states));
  // The momentum buffers came back too: the next steps agree exactly.
  for (Trained* s : {const_cast<Trained*>(&saved), &loaded}) {
    s->optimizer->zero_grad();
    torch::manual_seed(9);
    torch::nn::functional::cross_entropy(s->model->forward(torch::rand({4, 1, 28, 28})), torch::tensor({0, 1, 2, 3}))
        .backward();
    s->optimizer->step();
  }
  EXPECT_TRUE(same_parameters(*saved.model, *loaded.model));
}

TEST(Checkpoint, KeepsTheNewestAndIgnoresUnfinishedFiles) {
  TemporaryDirectory dir;
  const Trained s = cnn(1);
  const CheckpointFolder folder(dir.path(), 2);
  for (int64_t step : {10, 20, 30}) folder.save(*s.model, *s.optimizer, {{0, 0, step, 1}, "cnn", {}});
  std::ofstream(dir.path() + "/step-0000000040.pt.tmp") << "half a checkpoint";
  EXPECT_EQ(folder.list(),
            (std::vector<std::string>{dir.path() + "/step-0000000020.pt", dir.path() + "/step-0000000030.pt"}));
  EXPECT_EQ(folder.latest(), dir.path() + "/step-0000000030.pt");
}

TEST(Checkpoint, CorruptFilesAndOtherModelsAreRefusedWithoutChangingAnything) {
  TemporaryDirectory dir;
  const Trained s = cnn(1);
  const std::string path = CheckpointFolder(dir.path(), 3).save(*s.model, *s.optimizer, {{1, 0, 5, 1}, "cnn", {}});

  Trained other = cnn(2);
  std::string bytes = file_bytes(path);
  const std::string corrupt = dir.path() + "/corrupt.pt";
  std::ofstream(corrupt, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    load_checkpoint(corrupt, *other.model, *other.optimizer);
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_TRUE(contains(error.what(), corrupt + ": not a readable checkpoint")) << error.what();
  }
  EXPECT_FALSE(same_parameters(*s.model, *other.model));

  torch::manual_seed(3);
  auto mlp = make_model("mlp", ModelOptions().in_channels(1).num_classes(10).image_size(28));
  const auto before = mlp->parameters()[0].clone();
  torch::optim::SGD optimizer(mlp->parameters(), torch::optim::SGDOptions(0.1));
  try {
    load_checkpoint(path, *mlp, optimizer);
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_TRUE(contains(error.what(), path + " (saved from model 'cnn')")) << error.what();
    EXPECT_TRUE(contains(error.what(), "is it a checkpoint of another model?")) << error.what();
  }
  EXPECT_TRUE(torch::equal(before, mlp->parameters()[0]));
  EXPECT_EQ(file_bytes(path), bytes);

  std::ofstream(dir.path() + "/text.pt") << "not a checkpoint at all";
  EXPECT_THROW(load_checkpoint(dir.path() + "/text.pt", *other.model, *other.optimizer), DataError);
  EXPECT_THROW(load_checkpoint(dir.path() + "/missing.pt", *other.model, *other.optimizer), DataError);
}

// A training run that checkpoints a large model at every step, killed at random moments:
// whatever the moment, the newest checkpoint loads.
TEST(Checkpoint, SigkillWhileWritingNeverLeavesTheLatestCorruptOrMissing) {
  TemporaryDirectory out;
  std::mt19937 random(20261121);
  // Each attempt resumes the run, so once a first checkpoint exists every later kill is checked.
  int checked = 0;
  for (int attempt = 0; attempt < 12 && checked < 4; ++attempt) {
    const std::vector<std::string> command = {LOCKSTEP_TOOL,
                                              "train",
                                              "-n",
                                              "1",
                                              "--model",
                                              "resnet18",
                                              "--limit",
                                              "256",
                                              "--val-limit",
                                              "16",
                                              "--batch-size",
                                              "4",
                                              "--epochs",
                                              "1",
                                              "--checkpoint-every",
                                              "1",
                                              "--keep",
                                              "2",
                                              "--out",
                                              out.path() + "/run",
                                              "--resume"};
    // As one rank of a launch, so that SIGKILL hits the process that writes.
    const std::string port = std::to_string(testing::free_port());
    const CheckpointFolder folder(out.path() + "/run/checkpoints", 2);
    const auto before = folder.list();
    testing::ToolProcess run(command, {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
                                       "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port});
    // Once this run has put a checkpoint in place it writes one every step (about a
    // second here): a random moment after that falls anywhere in writing, however long the
    // start took on a loaded machine.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (folder.list() == before && testing::process_alive(run.pid()) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 2000));
    ::kill(run.pid(), SIGKILL);
    run.wait_for_exit(std::chrono::seconds(10));
    const std::string latest = folder.latest();
    if (latest.empty()) continue;  // killed before its first checkpoint
    torch::manual_seed(0);
    auto model = make_model("resnet18", ModelOptions().in_channels(1).num_classes(10).image_size(28));
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    EXPECT_NO_THROW(load_checkpoint(latest, *model, optimizer)) << latest;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

}  // namespace
}  // namespace lockstep::train
