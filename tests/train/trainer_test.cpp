// The Trainer in a world of one (ranks as processes are tested through `lockstep train`):
// schedules, metrics at log intervals, sinks, clipping and callbacks.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/comm/replicas.h"
#include "lockstep/data/loader.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/metrics_sink.h"
#include "lockstep/train/models.h"
#include "lockstep/train/sample_log.h"
#include "lockstep/train/trainer.h"
#include "support/tool_process.h"
#include "train/clip_grad_norm.h"

namespace lockstep::train {
namespace {

// The trainer's clipping is libtorch's clip_grad_norm_ bit for bit, without its .item().
TEST(ClipGradNorm, HasTheBitsOfLibtorchsAndReturnsTheNormAsATensor) {
  for (const double max_norm : {0.5, 1e6}) {  // clipping, and not
    std::vector<torch::Tensor> ours, theirs;
    torch::manual_seed(5);
    for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 4}, {7}, {2, 2, 5}}) {
      ours.push_back(torch::zeros(shape, torch::requires_grad()));
      ours.back().mutable_grad() = torch::randn(shape);
      theirs.push_back(torch::zeros(shape, torch::requires_grad()));
      theirs.back().mutable_grad() = ours.back().grad().clone();
    }
    ours.push_back(torch::zeros({2}, torch::requires_grad()));  // no gradient: left out, as by libtorch
    const torch::Tensor norm = clip_grad_norm(ours, max_norm);
    const double expected = torch::nn::utils::clip_grad_norm_(theirs, max_norm);
    EXPECT_EQ(norm.item<double>(), expected);
    for (size_t i = 0; i < theirs.size(); ++i) EXPECT_TRUE(torch::equal(ours[i].grad(), theirs[i].grad())) << i;
  }
}

using testing::TemporaryDirectory;

// Two well-separated classes of 1×4×4 images: learnable in a few steps.
std::shared_ptr<data::TensorDataset> two_blobs(int64_t n) {
  torch::manual_seed(3);
  const auto labels = torch::arange(n) % 2;
  const auto images = (labels.view({n, 1, 1, 1}) * 160 + torch::randint(0, 60, {n, 1, 4, 4})).to(torch::kUInt8);
  return std::make_shared<data::TensorDataset>(images, labels, 2, "two blobs");
}

data::LoaderOptions loader_options(size_t batch) {
  return data::LoaderOptions().sampler(data::SamplerOptions().batch_size(batch).seed(1)).threads(1);
}

size_t lines_in(const std::string& path) {
  std::ifstream file(path);
  return static_cast<size_t>(std::count(std::istreambuf_iterator<char>(file), {}, '\n'));
}

class Recorder : public MetricsSink {
 public:
  explicit Recorder(std::vector<Record>& records) : records_(records) {}
  void write(const Record& record) override { records_.push_back(record); }

 private:
  std::vector<Record>& records_;
};

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!lockstep::is_initialized()) lockstep::init();  // no environment: a world of one
  }
};

TEST(Schedules, WarmUpStepAndCosineGiveExactRates) {
  const auto warm_cosine = ScheduleOptions().kind("cosine").warmup_steps(4).min_lr(0.0);
  EXPECT_DOUBLE_EQ(learning_rate(warm_cosine, 1.0, 0, 104, 10), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate(warm_cosine, 1.0, 3, 104, 10), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(warm_cosine, 1.0, 4, 104, 10), 1.0);
  EXPECT_NEAR(learning_rate(warm_cosine, 1.0, 54, 104, 10), 0.5, 1e-12);
  EXPECT_NEAR(learning_rate(warm_cosine, 1.0, 104, 104, 10), 0.0, 1e-12);
  const auto step = ScheduleOptions().kind("step").step_epochs(2).gamma(0.1);
  EXPECT_DOUBLE_EQ(learning_rate(step, 1.0, 19, 100, 10), 1.0);
  EXPECT_NEAR(learning_rate(step, 1.0, 20, 100, 10), 0.1, 1e-15);
  EXPECT_NEAR(learning_rate(step, 1.0, 45, 100, 10), 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(ScheduleOptions(), 0.3, 77, 100, 10), 0.3);
  EXPECT_THROW(learning_rate(ScheduleOptions().kind("exponential"), 1.0, 0, 1, 1), ConfigError);
}

TEST_F(TrainerTest, LearnsLogsEveryIntervalAndValidates) {
  const auto dataset = two_blobs(96);
  auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4).hidden({16}));
  auto optimizer =
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Trainer trainer(model, optimizer, cross_entropy_loss(), TrainerOptions().epochs(3).lr(0.1).log_every(4));
  std::vector<Record> records;
  trainer.add_sink(std::make_unique<Recorder>(records));
  int callbacks = 0;
  trainer.on_record([&](const Record&) { ++callbacks; });

  data::PrefetchLoader train(dataset, loader_options(16));  // 6 batches an epoch
  data::PrefetchLoader validation(dataset, loader_options(32));
  const FitResult result = trainer.fit(train, &validation);

  EXPECT_EQ(result.steps, 18);
  ASSERT_TRUE(result.validation.has_value());
  EXPECT_EQ(result.validation->value("top1"), 1.0);
  EXPECT_EQ(result.validation->value("samples"), 96);
  // Per epoch: steps 4 (interval), then the epoch's 2 remaining steps, then validation.
  std::vector<int64_t> train_steps;
  for (const auto& r : records) {
    if (r.phase == "train") train_steps.push_back(r.step);
  }
  EXPECT_EQ(train_steps, (std::vector<int64_t>{4, 6, 8, 12, 16, 18}));
  EXPECT_EQ(callbacks, static_cast<int>(records.size()));
  EXPECT_EQ(records.back().phase, "val");
  EXPECT_EQ(records.back().epoch, 3);
  EXPECT_LT(records[4].value("loss"), records[0].value("loss"));
  EXPECT_GT(records[0].value("samples_per_second"), 0);
  EXPECT_DOUBLE_EQ(records[0].value("lr"), 0.1);
}

// Examples that take 5 ms each to read: the step waits for data most of the time.
class SlowDataset : public data::Dataset {
 public:
  explicit SlowDataset(std::shared_ptr<data::Dataset> fast) : fast_(std::move(fast)) {}
  size_t size() const override { return fast_->size(); }
  data::Sample get(size_t index) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return fast_->get(index);
  }
  int64_t num_classes() const override { return fast_->num_classes(); }
  std::string describe(size_t index) const override { return fast_->describe(index); }

 private:
  std::shared_ptr<data::Dataset> fast_;
};

TEST_F(TrainerTest, LogsTheShareOfEachIntervalSpentWaitingForData) {
  const auto wait_of = [](std::shared_ptr<data::Dataset> dataset) {
    auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4).hidden({16}));
    auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
    Trainer trainer(model, optimizer, cross_entropy_loss(), TrainerOptions().epochs(1).lr(0.1).log_every(3));
    std::vector<Record> records;
    trainer.add_sink(std::make_unique<Recorder>(records));
    data::PrefetchLoader train(dataset, loader_options(16));
    trainer.fit(train, nullptr);
    return records.at(0).value("data_wait");
  };
  const double slow = wait_of(std::make_shared<SlowDataset>(two_blobs(96)));
  EXPECT_GT(slow, 0.5) << "16 reads of 5 ms per step against a step of well under 1 ms";
  EXPECT_LE(slow, 1.0);
  const double fast = wait_of(two_blobs(96));
  EXPECT_GE(fast, 0.0);
  EXPECT_LT(fast, slow);
}

TEST_F(TrainerTest, WritesJsonLinesCsvAndTensorBoardUnderTheRunFolder) {
  TemporaryDirectory out;
  const auto dataset = two_blobs(32);
  auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4).hidden({8}));
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  std::ostringstream console;
  Trainer trainer(model, optimizer, cross_entropy_loss(),
                  TrainerOptions().epochs(2).lr(0.1).log_every(1).out_dir(out.path()));
  trainer.add_sink(console_sink(console, /*interactive=*/false));
  data::PrefetchLoader train(dataset, loader_options(8));
  data::PrefetchLoader validation(dataset, loader_options(8));
  trainer.fit(train, &validation);

  const auto records = read_json_lines(out.path() + "/metrics.jsonl");
  ASSERT_EQ(records.size(), 10u);  // 4 steps an epoch, each logged, then validation; 2 epochs
  // The console printed a line per record, with the same loss to its 4 decimals.
  const auto lines = testing::lines_of(console.str());
  ASSERT_EQ(lines.size(), records.size()) << console.str();
  for (size_t i = 0; i < records.size(); ++i) {
    char loss[32];
    std::snprintf(loss, sizeof loss, "loss %.4f", records[i].value("loss"));
    EXPECT_TRUE(testing::contains(lines[i], loss)) << lines[i] << " vs " << loss;
  }
  EXPECT_EQ(lines_in(out.path() + "/train.csv"), 1u + 8u);  // header, 8 steps
  EXPECT_EQ(lines_in(out.path() + "/val.csv"), 1u + 2u);
  EXPECT_FALSE(std::filesystem::is_empty(out.path() + "/tensorboard"));
  EXPECT_EQ(CheckpointFolder(out.path() + "/checkpoints", 3).list().size(), 2u);  // one per epoch
}

TEST_F(TrainerTest, ClipsGradientsToTheGivenNorm) {
  auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4).hidden({8}));
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(1e-9));
  Trainer trainer(model, optimizer, cross_entropy_loss(), TrainerOptions().clip_grad_norm(1e-3));
  const auto dataset = two_blobs(8);
  data::PrefetchLoader loader(dataset, loader_options(8));
  trainer.train_step(*loader.next());
  trainer.update();
  double norm = 0;
  for (const auto& p : model->parameters()) norm += p.grad().pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(norm), 1e-3, 1e-6);
}

// Two Trainers on two sub-groups of four replicas: each reduces its metrics, writes its sinks
// and checkpoints (on its group's rank 0) and scales its learning rate in its own DDP group,
// not the default group of all four.
TEST(TrainerOnReplicas, UsesItsDdpGroupForSinksCheckpointsAndTheLearningRate) {
  TemporaryDirectory out;
  const auto dataset = two_blobs(64);
  std::vector<std::vector<Record>> records(4);
  run_replicas(4, [&](ProcessGroup world) {
    const ProcessGroup first = new_group({0, 1});
    const ProcessGroup second = new_group({2, 3});
    const ProcessGroup& mine = world.rank() < 2 ? first : second;
    torch::manual_seed(5);
    auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4).hidden({8}));
    auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
    const std::string folder = out.path() + "/group" + std::to_string(world.rank() / 2);
    Trainer trainer(model, optimizer, cross_entropy_loss(),
                    TrainerOptions().epochs(1).lr(0.1).scale_lr_by_world_size(true).log_every(1).out_dir(folder).ddp(
                        DDPOptions().group(mine)));
    trainer.add_sink(std::make_unique<Recorder>(records[world.rank()]));
    data::PrefetchLoader train(dataset, loader_options(8));
    trainer.fit(train, nullptr);
  });
  for (int r = 0; r < 4; ++r) {
    const bool group_rank_zero = r % 2 == 0;
    EXPECT_EQ(records[r].empty(), !group_rank_zero) << "replica " << r;
    for (const auto& record : records[r]) EXPECT_DOUBLE_EQ(record.value("lr"), 0.2) << "replica " << r;
  }
  for (const std::string group : {"group0", "group1"}) {
    EXPECT_EQ(CheckpointFolder(out.path() + "/" + group + "/checkpoints", 3).list().size(), 1u) << group;
    EXPECT_EQ(read_json_lines(out.path() + "/" + group + "/metrics.jsonl").size(), records[0].size()) << group;
  }
}

// Rank 0's sample_log is the run's: the other replicas, with none set, still send it their
// ids, and the log holds every sample of the epoch once.
TEST(TrainerOnReplicas, ASampleLogSetOnRankZeroAloneHoldsEveryRanksSamples) {
  TemporaryDirectory out;
  const auto dataset = two_blobs(48);
  const std::string log = out.path() + "/samples.log";
  run_replicas(3, [&](ProcessGroup world) {
    torch::manual_seed(5);
    auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4).hidden({8}));
    auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
    Trainer trainer(model, optimizer, cross_entropy_loss(),
                    TrainerOptions().epochs(2).lr(0.1).sample_log(world.rank() == 0 ? log : ""));
    data::PrefetchLoader train(
        dataset, data::LoaderOptions().sampler(data::SamplerOptions().global_batch_size(12).seed(1)).threads(1));
    trainer.fit(train, nullptr);
  });
  const SampleLog read = read_sample_log(log);
  ASSERT_EQ(read.steps.size(), 8u);
  for (const auto& step : read.steps) EXPECT_EQ(step.ids.size(), 12u) << "step " << step.step;
  const SampleAudit audit = audit_sample_log(read);
  EXPECT_EQ(audit.lines, (std::vector<std::string>{"epoch 1: every sample once (48 of 48 samples in steps 1 to 4)",
                                                   "epoch 2: every sample once (48 of 48 samples in steps 5 to 8)"}));
}

// bf16 mixed precision: the forward pass computes in bfloat16 under autocast (here the
// CPU's, the model's device), while parameters and their gradients stay float32.
TEST_F(TrainerTest, Bf16AutocastRunsTheForwardInBfloat16AndKeepsFloat32Parameters) {
  for (const bool bf16 : {false, true}) {
    auto linear = torch::nn::Linear(16, 2);
    torch::ScalarType computed = torch::kFloat;
    auto forward = [&](const torch::Tensor& images) {
      const auto logits = linear->forward(images.flatten(1));
      computed = logits.scalar_type();
      return logits;
    };
    auto optimizer = std::make_shared<torch::optim::SGD>(linear->parameters(), torch::optim::SGDOptions(0.1));
    Trainer trainer(linear.ptr(), forward, optimizer, cross_entropy_loss(), TrainerOptions().autocast_bf16(bf16));
    data::PrefetchLoader loader(two_blobs(8), loader_options(8));
    trainer.train_step(*loader.next());
    EXPECT_EQ(computed, bf16 ? torch::kBFloat16 : torch::kFloat);
    EXPECT_EQ(linear->weight.grad().scalar_type(), torch::kFloat);
    EXPECT_EQ(linear->forward(torch::ones({1, 16})).scalar_type(), torch::kFloat) << "autocast left on after the step";
  }
}

TEST_F(TrainerTest, BadOptionsNameTheSetting) {
  auto model = make_model("mlp", ModelOptions().in_channels(1).num_classes(2).image_size(4));
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  try {
    Trainer trainer(model, optimizer, cross_entropy_loss(), TrainerOptions().epochs(0));
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_TRUE(testing::contains(error.what(), "epochs must be at least 1")) << error.what();
  }
}

}  // namespace
}  // namespace lockstep::train
