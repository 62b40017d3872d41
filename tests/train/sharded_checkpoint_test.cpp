// Checkpoints of a ShardedOptimizer, on replicas: each rank writes its shard of the optimizer
// state beside rank 0's file, and the state comes back whole at the same or another world
// size; a missing or truncated shard is one line naming the file.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "optim/optimizer_state_table.h"
#include "lockstep/lockstep.h"
#include "lockstep/train/checkpoint.h"
#include "support/world.h"
#include "train/checkpoint/distributed_checkpoint.h"

namespace lockstep::train {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::TemporaryDirectory;

constexpr int64_t kSavedStep = 6;

// Drawn from the replica's own generator: replicas share libtorch's default one.
torch::nn::Sequential make_mlp(int seed) {
  torch::nn::Sequential model{nullptr};
  with_replica_generator([&] {
    torch::manual_seed(seed);
    model = torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Linear(32, 16),
                                  torch::nn::Tanh(), torch::nn::Linear(16, 4));
  });
  return model;
}

// A model, DDP and Adam, sharded or not, on this replica's default group.
struct AdamRun {
  explicit AdamRun(bool sharded, int seed = 1) : model(make_mlp(seed + lockstep::rank())), ddp(model) {
    const auto options = torch::optim::AdamOptions(0.01).weight_decay(1e-3);
    if (sharded) {
      optimizer = std::make_unique<ShardedOptimizer<torch::optim::Adam>>(model->parameters(), options);
    } else {
      optimizer = std::make_unique<torch::optim::Adam>(model->parameters(), options);
    }
  }
  void train(int steps) {
    for (int step = 0; step < steps; ++step) {
      torch::Tensor x, y;
      with_replica_generator([&] {
        torch::manual_seed(1000 + 10 * step + lockstep::rank());
        x = torch::randn({6, 8});
        y = torch::randn({6, 4});
      });
      optimizer->zero_grad();
      torch::mse_loss(model->forward(x), y).backward();
      optimizer->step();
    }
  }
  TrainedState trained() { return TrainedState{*model, *optimizer, ddp, torch::kCPU, ProcessGroup()}; }

  torch::nn::Sequential model;
  DistributedDataParallel ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

// Every parameter's Adam state, in parameter order: step counts, then the moments.
std::vector<torch::Tensor> adam_state(torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> flat;
  using StateMap = std::decay_t<decltype(optimizer.state())>;
  for (const auto& p : optimizer.param_groups().at(0).params()) {
    auto found = optimizer.state().find(detail::state_key<StateMap>(p));
    if (found == optimizer.state().end()) {
      flat.push_back(torch::tensor(-1));
      continue;
    }
    auto& s = static_cast<torch::optim::AdamParamState&>(*found->second);
    flat.insert(flat.end(), {torch::tensor(s.step()), s.exp_avg(), s.exp_avg_sq()});
  }
  return flat;
}

void expect_same_state(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], want[i])) << what << ": state tensor " << i;
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  // Trains kSavedStep steps on 2 replicas and saves; keeps the state consolidated on rank 0.
  void SetUp() override {
    run_replicas(2, [&](ProcessGroup) {
      AdamRun run(true);
      run.train(kSavedStep);
      save_collectively(folder(), run.trained(), {0, kSavedStep, kSavedStep, 2}, "mlp");
      dynamic_cast<OptimizerSharding&>(*run.optimizer).consolidate_state_dict(0);
      if (lockstep::rank() == 0) consolidated = adam_state(*run.optimizer);
    });
  }
  CheckpointFolder folder() const { return CheckpointFolder(dir.path() + "/checkpoints", 3); }
  std::string shard(int rank) const {
    return dir.path() + "/checkpoints/step-0000000006.optimizer-" + std::to_string(rank) + "-of-2.pt";
  }

  // Resumes on `world` replicas, each with a sharded Adam; every replica's error, if any.
  std::vector<std::string> resume_on(int world, std::vector<torch::Tensor>* state = nullptr) {
    std::vector<std::string> errors(world);
    run_replicas(world, [&](ProcessGroup) {
      AdamRun run(true, 50);
      try {
        resume_collectively(folder(), run.trained());
      } catch (const DataError& e) {
        errors[lockstep::rank()] = e.what();
        return;
      }
      dynamic_cast<OptimizerSharding&>(*run.optimizer).consolidate_state_dict(0);
      if (lockstep::rank() == 0 && state != nullptr) *state = adam_state(*run.optimizer);
    });
    return errors;
  }

  TemporaryDirectory dir;
  std::vector<torch::Tensor> consolidated;
};

TEST_F(ShardedCheckpoint, EachRankWritesItsShardBesideRankZerosFile) {
  EXPECT_EQ(folder().list(), std::vector<std::string>{folder().path(kSavedStep)});
  EXPECT_TRUE(fs::is_regular_file(shard(0)));
  EXPECT_TRUE(fs::is_regular_file(shard(1)));
  // The unsharded run's state is the consolidated one.
  std::vector<torch::Tensor> unsharded;
  run_replicas(2, [&](ProcessGroup) {
    AdamRun run(false);
    run.train(kSavedStep);
    if (lockstep::rank() == 0) unsharded = adam_state(*run.optimizer);
  });
  expect_same_state(consolidated, unsharded, "consolidated against unsharded");
}

TEST_F(ShardedCheckpoint, LoadsAtWorldsTwoThreeAndOneToTheConsolidatedState) {
  for (int world : {2, 3, 1}) {
    std::vector<torch::Tensor> state;
    EXPECT_EQ(resume_on(world, &state), std::vector<std::string>(world)) << "world " << world;
    expect_same_state(state, consolidated, "loaded on " + std::to_string(world) + " ranks");
  }
  // Into an ordinary Adam in one process, as a user reads it.
  auto model = make_mlp(7);
  torch::optim::Adam adam(model->parameters());
  load_checkpoint(folder().path(kSavedStep), *model, adam);
  expect_same_state(adam_state(adam), consolidated, "loaded into an unsharded Adam");
}

TEST_F(ShardedCheckpoint, AMissingOrTruncatedShardIsOneLineNamingTheFile) {
  fs::resize_file(shard(1), fs::file_size(shard(1)) / 2);
  auto errors = resume_on(2);
  for (const auto& e : errors) {
    EXPECT_TRUE(contains(e, shard(1) + ": not a readable optimizer shard (corrupt or truncated?)")) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  fs::remove(shard(1));
  errors = resume_on(3);  // rank 0 reads shard 0 only; ranks 1 and 2 need shard 1
  for (const auto& e : errors) {
    EXPECT_TRUE(contains(e, shard(1) + ": no such optimizer shard; a sharded checkpoint needs the shard of every rank "
                                       "that wrote it"))
        << e;
  }
}

TEST_F(ShardedCheckpoint, ACheckpointOfAnotherModelNamesTheFirstDifferingParameter) {
  std::vector<std::string> errors(2);
  run_replicas(2, [&](ProcessGroup) {
    auto model = torch::nn::Sequential(torch::nn::Linear(8, 30), torch::nn::ReLU(), torch::nn::Linear(30, 4));
    DistributedDataParallel ddp(model);
    ShardedOptimizer<torch::optim::Adam> adam(model->parameters());
    try {
      resume_collectively(folder(), TrainedState{*model, adam, ddp, torch::kCPU, ProcessGroup()});
    } catch (const DataError& e) {
      errors[lockstep::rank()] = e.what();
    }
  });
  for (const auto& e : errors)
    EXPECT_TRUE(contains(e, "parameter '0.bias' has shape [32] there but [30] in this model")) << e;
}

TEST_F(ShardedCheckpoint, OlderCheckpointsGoWithTheirShards) {
  run_replicas(2, [&](ProcessGroup) {
    AdamRun run(true);
    const CheckpointFolder keep_one(dir.path() + "/checkpoints", 1);
    save_collectively(keep_one, run.trained(), {0, 7, 7, 2}, "mlp");
  });
  EXPECT_EQ(folder().list(), std::vector<std::string>{folder().path(7)});
  EXPECT_FALSE(fs::exists(shard(0)));
  EXPECT_FALSE(fs::exists(shard(1)));
  EXPECT_TRUE(fs::exists(dir.path() + "/checkpoints/step-0000000007.optimizer-1-of-2.pt"));
}

}  // namespace
}  // namespace lockstep::train
