#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>

#include "lockstep/data/loader.h"
#include "lockstep/ddp/distributed_data_parallel.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/lr_schedule.h"
#include "lockstep/train/metrics_sink.h"

namespace lockstep::train {

/// A model's forward pass on a batch of inputs.
using Forward = std::function<torch::Tensor(const torch::Tensor& input)>;

/// Loss of a batch's output against its targets, averaged over the batch.
using LossFunction = std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)>;
/// Logits N×C against class indices N.
LossFunction cross_entropy_loss();
/// Outputs against targets of the same shape.
LossFunction mse_loss();

/// How a Trainer runs.
struct TrainerOptions {
  TORCH_ARG(int64_t, epochs) = 1;
  /// The base learning rate, set on every parameter group of the optimizer at each step.
  TORCH_ARG(double, lr) = 0.01;
  /// Multiply lr by the world size: the "linear scaling rule" (Goyal et al.), for a global
  /// batch that grows with the workers. Off by default: lr is used as given.
  TORCH_ARG(bool, scale_lr_by_world_size) = false;
  TORCH_ARG(ScheduleOptions, schedule);
  /// Clip the gradients' global L2 norm to this before each step.
  TORCH_ARG(std::optional<double>, clip_grad_norm);
  /// ZeRO-2: with a ShardedOptimizer, each rank keeps the reduced gradients of the
  /// parameters it steps only (DistributedDataParallel::shard_gradients), and clipping takes
  /// the norm across the ranks. ConfigError with another optimizer.
  TORCH_ARG(bool, shard_gradients) = false;
  /// Reduce metrics across ranks and log them every this many steps (and at epoch ends).
  TORCH_ARG(int64_t, log_every) = 50;
  /// Where metrics.jsonl, train.csv, val.csv, tensorboard/ and checkpoints/ go; nothing
  /// is written when empty.
  TORCH_ARG(std::string, out_dir);
  /// Where checkpoints go instead of out_dir/checkpoints: another folder, or an
  /// s3://BUCKET/PREFIX (endpoint, region and credentials from the environment and the AWS
  /// profile, as for S3 datasets).
  TORCH_ARG(std::string, checkpoint_dir);
  /// Save a checkpoint every this many steps, besides each epoch's end; 0: epoch ends only.
  TORCH_ARG(int64_t, checkpoint_every) = 0;
  TORCH_ARG(int, keep_checkpoints) = 3;
  /// Continue from the newest checkpoint in the checkpoint folder, when there is one.
  TORCH_ARG(bool, resume) = false;
  /// Stop after this step (and its checkpoint), as if interrupted; 0: run to the end.
  TORCH_ARG(int64_t, stop_after_step) = 0;
  /// Stop cleanly on SIGTERM or SIGINT: every rank finishes the same step, a checkpoint of
  /// it is written, and fit() returns with `preempted` set (lockstep train then exits with
  /// EX_TEMPFAIL, 75: "try again later"). SIGUSR1 writes a checkpoint after the next step and training
  /// goes on. Installs process-wide handlers for the three signals; costs one tiny
  /// all_reduce per step. Off by default: a library should not take a program's signals.
  TORCH_ARG(bool, handle_signals) = false;
  /// Recorded in checkpoints, to name the model when a checkpoint does not fit.
  TORCH_ARG(std::string, model_name);
  /// Run forward passes and losses under bf16 autocast on the model's device (mixed
  /// precision: parameters, gradients and the optimizer stay float32).
  TORCH_ARG(bool, autocast_bf16) = false;
  /// Record a timeline of every rank (include/lockstep/timeline.h) during fit(), merged into
  /// out_dir/timeline.json at its end (unless LOCKSTEP_TIMELINE records already, at its own
  /// prefix); while one records (this, or LOCKSTEP_TIMELINE), the
  /// progress line names a rank that keeps the others waiting, and each train record holds
  /// the per-step split (step_data_ms, step_compute_ms, step_comm_ms). Costs one small
  /// all_gather per step.
  TORCH_ARG(bool, timeline) = false;
  /// Append each step's sample ids (Batch::ids of every rank, gathered to rank 0) to this
  /// file, as lockstep/train/sample_log.h reads them; a resume checks that the log reaches
  /// the checkpoint's step and cuts the steps trained after it. Costs two small all_gathers
  /// per step. Empty: no log. Rank 0's setting is the run's: the other ranks follow it.
  TORCH_ARG(std::string, sample_log);
  /// Live recovery (`lockstep train --recovery live`): fit() goes on from this position with
  /// the module and optimizer as they are (healed from a peer by whoever regrouped), reading
  /// no checkpoint. Unset: from the start, or the checkpoint `resume` finds.
  TORCH_ARG(std::optional<TrainingPosition>, start_at);
  /// Live recovery: asked on every rank after each step, before its update, and agreed in
  /// the step's signal all_reduce (no round trip of its own); when any rank says a joiner
  /// waits, fit() returns after that step with FitResult::regroup. Set, it also writes the
  /// sample log after every step, so that whichever member is rank 0 next finds it whole.
  TORCH_ARG(std::function<bool()>, joiner_waiting);
  /// How the model is wrapped; its group is the Trainer's: metrics are reduced, checkpoints
  /// saved and resumed, sinks written (by its rank 0) and the learning rate scaled in it.
  TORCH_ARG(DDPOptions, ddp);
};

/// What fit() ended with.
struct FitResult {
  int64_t steps = 0;
  double seconds = 0;
  bool stopped_early = false;
  /// Stopped by SIGTERM or SIGINT (TrainerOptions::handle_signals), after a checkpoint.
  bool preempted = false;
  /// The last validation, when there was one.
  std::optional<Record> validation;
  /// A joiner waits (TrainerOptions::joiner_waiting): the members change, then fit() goes
  /// on from position().
  bool regroup = false;
};

/// One training step's outputs, detached.
struct StepOutput {
  torch::Tensor output;
  torch::Tensor loss;
};

/// Data-parallel training of a classifier (or any model with a loss): FluxDistributed's
/// prepare_training/train, built from train_step -> (gradient sync inside backward, by
/// DistributedDataParallel) -> update. Metrics are accumulated locally and reduced across
/// ranks only at log intervals; sinks are written on rank 0.
class Trainer {
 public:
  /// Any module with `Tensor forward(Tensor)`, torch::nn::Sequential included.
  template <typename M>
  Trainer(const torch::nn::ModuleHolder<M>& model, std::shared_ptr<torch::optim::Optimizer> optimizer,
          LossFunction loss, TrainerOptions options = TrainerOptions())
      : Trainer(
            model.ptr(), [module = model.ptr()](const torch::Tensor& input) { return module->forward(input); },
            std::move(optimizer), std::move(loss), std::move(options)) {}
  Trainer(std::shared_ptr<torch::nn::Module> module, Forward forward,
          std::shared_ptr<torch::optim::Optimizer> optimizer, LossFunction loss,
          TrainerOptions options = TrainerOptions());
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Another destination for metrics, written on rank 0.
  void add_sink(std::unique_ptr<MetricsSink> sink);
  /// Called on every rank with each reduced record (train intervals and validations).
  void on_record(std::function<void(const Record&)> callback);

  /// Trains options.epochs epochs of `train`, validating on `validation` after each when
  /// given, checkpointing and logging as the options say.
  FitResult fit(data::PrefetchLoader& train, data::PrefetchLoader* validation = nullptr);
  /// Mean loss, top-1 and top-5 accuracy over one pass of `loader`, reduced across ranks.
  Record evaluate(data::PrefetchLoader& loader);

  /// Forward, loss and backward of one batch (moved to the model's device first); gradients
  /// are averaged across ranks when it returns.
  StepOutput train_step(const data::Batch& batch);
  /// Clips, sets the scheduled learning rate and steps the optimizer.
  void update();
  /// Live recovery: whether the last fit() ended failing in a step's commit, this rank
  /// holding that step's averaged gradients, clipped, and its learning rate set.
  bool update_pending() const;

  /// Writes a checkpoint of the module and optimizer as they are, at `position`, where fit()
  /// writes them (TrainerOptions::checkpoint_dir, else out_dir/checkpoints); every rank calls
  /// it. Live recovery's way out when fewer workers are left than the job needs.
  void save_checkpoint(const TrainingPosition& position);

  int64_t step() const;
  /// Where training stands after the last step that updated the parameters: whatever
  /// failed after it, the module and optimizer hold that step's state. Nullopt until a
  /// fit() has settled where it starts (a checkpoint it resumes may be half read).
  std::optional<TrainingPosition> position() const;
  torch::nn::Module& module();
  torch::optim::Optimizer& optimizer();

 private:
  struct State;
  struct FitRun;  // one fit(): where it starts, what it does around each step
  std::unique_ptr<State> state_;
};

}  // namespace lockstep::train
