#include "lockstep/train/trainer.h"

#include <chrono>
#include <filesystem>
#include <iostream>

#include <torch/nn/functional/loss.h>

#include "job/seconds_since.h"
#include "lockstep/error.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/comm/init.h"
#include "lockstep/optim/sharded_optimizer.h"
#include "lockstep/timeline.h"
#include "lockstep/train/checkpoint.h"
#include "test_hooks/test_hooks.h"
#include "comm/groups/regroup.h"
#include "comm/tensors/first_error.h"
#include "train/autocast_guard.h"
#include "train/clip_grad_norm.h"
#include "train/checkpoint/distributed_checkpoint.h"
#include "train/fit_steps.h"
#include "train/metric_sums.h"
#include "train/samples/sample_log_writer.h"
#include "timeline/recorder.h"

namespace lockstep::train {
namespace {

using Clock = std::chrono::steady_clock;

void check_options(const TrainerOptions& options) {
  if (options.epochs() < 1)
    throw ConfigError("Trainer: epochs must be at least 1, got " + std::to_string(options.epochs()));
  if (options.lr() <= 0) throw ConfigError("Trainer: lr must be positive, got " + std::to_string(options.lr()));
  if (options.log_every() < 1) throw ConfigError("Trainer: log_every must be at least 1");
  if (options.checkpoint_every() < 0) throw ConfigError("Trainer: checkpoint_every must not be negative");
  if (options.clip_grad_norm() && *options.clip_grad_norm() <= 0)
    throw ConfigError("Trainer: clip_grad_norm must be positive");
  check_schedule(options.schedule());
}

// Passes on the records of one phase only: a CSV file holds one set of columns, and
// training and validation records have different values.
class PhaseSink : public MetricsSink {
 public:
  PhaseSink(std::string phase, std::unique_ptr<MetricsSink> sink) : phase_(std::move(phase)), sink_(std::move(sink)) {}
  void write(const Record& record) override {
    if (record.phase == phase_) sink_->write(record);
  }
  void flush() override { sink_->flush(); }

 private:
  std::string phase_;
  std::unique_ptr<MetricsSink> sink_;
};

}  // namespace

LossFunction cross_entropy_loss() {
  return [](const torch::Tensor& output, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(output, target);
  };
}

LossFunction mse_loss() {
  return [](const torch::Tensor& output, const torch::Tensor& target) {
    return torch::nn::functional::mse_loss(output, target);
  };
}

struct Trainer::State {
  std::shared_ptr<torch::nn::Module> module;
  torch::Device device = torch::kCPU;  // the model's, where batches go
  Forward forward;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  LossFunction loss;
  TrainerOptions options;
  std::unique_ptr<DistributedDataParallel> ddp;
  OptimizerSharding* gradient_sharding = nullptr;  // the optimizer, when gradients are sharded
  std::vector<std::unique_ptr<MetricsSink>> sinks;
  std::vector<std::function<void(const Record&)>> callbacks;
  bool file_sinks_added = false;

  int64_t step = 0;
  double last_lr = 0;           // the rate of the latest update()
  bool update_pending = false;  // between a step's prepare_update() and its apply_update()
  int64_t epoch = 0;            // in progress, from 0
  int64_t batch_in_epoch = 0;   // of the epoch in progress, trained
  bool placed = false;          // fit() has settled where it starts: position() holds
  int64_t steps_per_epoch = 0;
  int64_t global_batch = 0;  // the loader's SamplerOptions::global_batch_size
  int64_t step_samples = 0;  // with it, the samples of the step in progress over all ranks
  int64_t dataset_size = 0;  // the train loader's, checked on resume
  int64_t total_steps = 0;
  Clock::time_point started;
  Clock::time_point interval_started;
  std::chrono::duration<double> waited_before{0};  // the train loader's waited() when the interval began
  MetricSums interval;
  std::unique_ptr<StragglerNotices> stragglers;  // while a timeline records

  Record record(const std::string& phase) const {
    Record r;
    r.phase = phase;
    r.epoch = epoch + 1;
    r.epochs = options.epochs();
    r.step = step;
    r.total_steps = total_steps;
    r.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return r;
  }

  void emit(const Record& r) {
    if (options.ddp().group().rank() == 0) {
      for (auto& sink : sinks) sink->write(r);
    }
    for (auto& callback : callbacks) callback(r);
  }

  // Reduces the interval's sums across ranks and logs them. Every rank calls it at the same
  // steps, since every rank has the same number of batches.
  // `waited`: the train loader's waited() so far, whose growth over the interval is the
  // share of it this rank spent waiting for data (data_wait; 0 when input keeps up).
  void log_interval(std::chrono::duration<double> waited) {
    double samples = 0;
    Record r = record("train");
    r.values = interval.reduce_across_ranks(options.ddp().group(), samples);
    const double seconds = std::chrono::duration<double>(Clock::now() - interval_started).count();
    r.values.emplace_back("samples_per_second", seconds > 0 ? samples / seconds : 0);
    r.values.emplace_back("lr", last_lr);
    r.values.emplace_back("data_wait", seconds > 0 ? (waited - waited_before).count() / seconds : 0);
    if (stragglers) {
      for (const auto& value : stragglers->watch().interval_means()) r.values.push_back(value);
    }
    emit(r);
    interval.clear();
    interval_started = Clock::now();
    waited_before = waited;
  }

  void flush() {
    if (options.ddp().group().rank() != 0) return;
    for (auto& sink : sinks) sink->flush();
  }

  // What an update does before the step is committed, so that a member whose commit failed
  // while others' succeeded can apply the step alone (live recovery, ZeRO-1).
  void prepare_update() {
    if (options.clip_grad_norm() && gradient_sharding != nullptr) {
      gradient_sharding->clip_grad_norm(*options.clip_grad_norm());
    } else if (options.clip_grad_norm()) {
      clip_grad_norm(module->parameters(), *options.clip_grad_norm());  // no host wait for the GPU
    }
    last_lr = scheduled_lr();
    for (auto& group : optimizer->param_groups()) group.options().set_lr(last_lr);
    update_pending = true;
  }

  // The step counts once committed, even when the step of a ShardedOptimizer then fails
  // sending its parameters: its own partition is updated by then (live recovery heals the rest).
  void apply_update() {
    update_pending = false;
    ++step;
    optimizer->step();
  }

  double scheduled_lr() const {
    const double base = options.lr() * (options.scale_lr_by_world_size() ? options.ddp().group().size() : 1);
    return learning_rate(options.schedule(), base, step, total_steps, steps_per_epoch);
  }
};

Trainer::Trainer(std::shared_ptr<torch::nn::Module> module, Forward forward,
                 std::shared_ptr<torch::optim::Optimizer> optimizer, LossFunction loss, TrainerOptions options)
    : state_(std::make_unique<State>()) {
  check_options(options);
  if (!module || !forward) throw ConfigError("Trainer: the model is empty");
  if (!optimizer) throw ConfigError("Trainer: the optimizer is null");
  State& s = *state_;
  s.module = std::move(module);
  s.forward = std::move(forward);
  s.optimizer = std::move(optimizer);
  s.loss = loss ? std::move(loss) : cross_entropy_loss();
  s.options = std::move(options);
  s.ddp = std::make_unique<DistributedDataParallel>(s.module, s.options.ddp());
  if (s.options.shard_gradients()) {
    s.gradient_sharding = dynamic_cast<OptimizerSharding*>(s.optimizer.get());
    if (s.gradient_sharding == nullptr) {
      throw ConfigError("Trainer: shard_gradients needs a lockstep::ShardedOptimizer, which steps each rank's share");
    }
    s.ddp->shard_gradients(*s.gradient_sharding);
  }
  const auto parameters = s.module->parameters();
  if (!parameters.empty()) s.device = parameters.front().device();
}

namespace {

// A batch on `device`: copies that do not block the host when the batch is in pinned memory.
data::Batch on_device(const data::Batch& batch, torch::Device device) {
  if (batch.images.device() == device) return batch;
  return {batch.images.to(device, /*non_blocking=*/true), batch.labels.to(device, /*non_blocking=*/true), batch.ids};
}

// Where fit() and save_checkpoint() write checkpoints.
CheckpointFolder checkpoint_folder_of(const TrainerOptions& o) {
  return CheckpointFolder(
      o.checkpoint_dir().empty() ? (std::filesystem::path(o.out_dir()) / "checkpoints").string() : o.checkpoint_dir(),
      o.keep_checkpoints());
}

}  // namespace

Trainer::~Trainer() = default;

void Trainer::save_checkpoint(const TrainingPosition& position) {
  State& s = *state_;
  if (s.options.out_dir().empty() && s.options.checkpoint_dir().empty()) {
    throw ConfigError("Trainer::save_checkpoint: TrainerOptions::out_dir and checkpoint_dir are empty");
  }
  const ProcessGroup& group = s.options.ddp().group();
  save_collectively(checkpoint_folder_of(s.options), {module(), optimizer(), *s.ddp, s.device, group}, position,
                    s.options.model_name());
}

void Trainer::add_sink(std::unique_ptr<MetricsSink> sink) { state_->sinks.push_back(std::move(sink)); }
void Trainer::on_record(std::function<void(const Record&)> callback) {
  state_->callbacks.push_back(std::move(callback));
}
int64_t Trainer::step() const { return state_->step; }
std::optional<TrainingPosition> Trainer::position() const {
  const State& s = *state_;
  if (!s.placed) return std::nullopt;
  return TrainingPosition{s.epoch,        s.batch_in_epoch, s.step, s.options.ddp().group().size(),
                          s.global_batch, s.dataset_size};
}
torch::nn::Module& Trainer::module() { return *state_->module; }
torch::optim::Optimizer& Trainer::optimizer() { return *state_->optimizer; }

StepOutput Trainer::train_step(const data::Batch& host_batch) {
  State& s = *state_;
  const data::Batch batch = on_device(host_batch, s.device);
  s.optimizer->zero_grad();
  torch::Tensor output, loss;
  {
    timeline::Span span(timeline::format::event::kForward);
    AutocastGuard autocast(s.device.type(), s.options.autocast_bf16());
    output = s.forward(batch.images);
    loss = s.loss(output, batch.labels);
    test_hooks::sleep_if_slowed(lockstep::rank(), "compute");
  }
  {
    timeline::Span span(timeline::format::event::kBackward);
    // DistributedDataParallel averages the gradients across ranks here: with a global batch
    // whose parts differ between ranks, each rank's mean loss weighs by its part, so that the
    // step is that of one process on all the step's samples.
    const int64_t part = batch.labels.size(0), ranks = s.options.ddp().group().size();
    if (s.step_samples > 0 && part * ranks != s.step_samples) {
      (loss * (static_cast<double>(part * ranks) / static_cast<double>(s.step_samples))).backward();
    } else {
      loss.backward();
    }
  }
  return {output.detach(), loss.detach()};
}

void Trainer::update() {
  timeline::Span span(timeline::format::event::kOptimizerStep);
  state_->prepare_update();
  state_->apply_update();
}

bool Trainer::update_pending() const { return state_->update_pending; }

Record Trainer::evaluate(data::PrefetchLoader& loader) {
  State& s = *state_;
  torch::nn::Module& module = *s.module;
  const bool was_training = module.is_training();
  module.eval();
  MetricSums sums;
  {
    torch::NoGradGuard no_grad;
    loader.set_epoch(0);
    while (auto host_batch = loader.next()) {
      const data::Batch batch = on_device(*host_batch, s.device);
      AutocastGuard autocast(s.device.type(), s.options.autocast_bf16());
      const torch::Tensor output = s.forward(batch.images);
      sums.add(output, batch.labels, s.loss(output, batch.labels));
    }
  }
  module.train(was_training);
  double samples = 0;
  Record r = s.record("val");
  r.values = sums.reduce_across_ranks(s.options.ddp().group(), samples);
  r.values.emplace_back("samples", samples);
  return r;
}

namespace {

// The timeline fit() records when TrainerOptions::timeline asks (and none records already):
// each rank's file under out_dir/timeline/, merged into out_dir/timeline.json at the end.
class FitTimeline {
 public:
  FitTimeline(bool wanted, const std::string& out_dir, const ProcessGroup& group) : group_(group) {
    // Every rank decides alike: by its options and the environment, which ranks share.
    if (!wanted || out_dir.empty() || !timeline::detail::prefix_from_environment().empty()) return;
    folder_ = std::filesystem::path(out_dir);
    // Each generation of live recovery records files of its own: its ranks are other workers.
    prefix_ = timeline::detail::generation_prefix((folder_ / "timeline" / "trace").string(), detail::generation());
    timeline::start(prefix_, group_);
    owned_ = true;
  }
  // A fit() that threw still closes this rank's file (no collective here: others may be gone).
  ~FitTimeline() {
    if (owned_) timeline::stop();
  }
  FitTimeline(const FitTimeline&) = delete;
  FitTimeline& operator=(const FitTimeline&) = delete;

  // Every rank, at the same point: each closes its file, then rank 0 merges them.
  void finish() {
    if (!owned_) return;
    owned_ = false;
    timeline::stop();
    lockstep::barrier(group_);
    if (group_.rank() != 0) return;
    std::vector<std::string> files;
    for (int rank : group_.ranks()) {
      files.push_back(prefix_ + ".rank-" + std::to_string(rank) + ".json");
    }
    timeline::merge(files, (folder_ / "timeline.json").string());
  }

 private:
  ProcessGroup group_;
  std::filesystem::path folder_;
  std::string prefix_;
  bool owned_ = false;
};

}  // namespace

// One fit(): resumes, opens the sinks and the timeline, then runs epochs of steps with the
// per-step observers and the checkpoint policy around each.
struct Trainer::FitRun {
  Trainer& trainer;
  State& s;
  const TrainerOptions& o;
  const ProcessGroup& group;
  const bool writes;
  const CheckpointFolder folder;
  const TrainedState trained;
  TrainingPosition start;
  std::optional<FitTimeline> fit_timeline;
  std::unique_ptr<TimelineSteps> timeline_steps;
  std::vector<StepObserver*> observers;
  std::optional<CheckpointPolicy> policy;
  bool logs_samples = false;                    // every rank, as rank 0's options say
  std::unique_ptr<SampleLogWriter> sample_log;  // rank 0's, when it logs

  FitRun(Trainer& t, data::PrefetchLoader& train)
      : trainer(t),
        s(*t.state_),
        o(s.options),
        group(o.ddp().group()),
        writes(!o.out_dir().empty()),
        folder(checkpoint_folder_of(o)),
        trained{t.module(), t.optimizer(), *s.ddp, s.device, group} {
    s.steps_per_epoch = static_cast<int64_t>(train.batches_per_epoch());
    s.global_batch = static_cast<int64_t>(train.sampler().options().global_batch_size());
    s.dataset_size = static_cast<int64_t>(train.sampler().dataset_size());
    s.total_steps = o.epochs() * s.steps_per_epoch;
    resume();
    open_file_sinks();
    open_sample_log(train);
    fit_timeline.emplace(o.timeline(), o.out_dir(), group);
    if (timeline::enabled()) {
      State& state = s;  // outlives this fit(), as the straggler notices do
      timeline_steps = std::make_unique<TimelineSteps>(group, [&state] { return state.ddp->buckets().size(); });
      s.stragglers = std::make_unique<StragglerNotices>(group, [&state](const std::string& notice) {
        Record r = state.record("notice");
        r.message = notice;
        state.emit(r);
      });
      observers = {timeline_steps.get(), s.stragglers.get()};
    } else {
      s.stragglers.reset();
    }
    policy.emplace(group, o.handle_signals(), o.joiner_waiting(), o.checkpoint_every(), o.stop_after_step());
    s.step = start.step;
    s.epoch = start.epoch;
    s.batch_in_epoch = start.batch;
    s.placed = true;
    s.started = s.interval_started = Clock::now();
    s.waited_before = train.waited();
  }

  void resume() {
    if (o.start_at()) {
      start = *o.start_at();
      return;
    }
    if (!o.resume() || !writes) return;
    if (const auto resumed = resume_collectively(folder, trained)) {
      start = *resumed;
      if (start.global_batch_size != s.global_batch) {
        throw ConfigError("the checkpoint in " + folder.folder() + " was trained with global batch size " +
                          std::to_string(start.global_batch_size) + ", but this run has " +
                          std::to_string(s.global_batch) + " (0: a batch per worker); resume with the same");
      }
      if (start.dataset_size != 0 && start.dataset_size != s.dataset_size) {  // 0: a checkpoint from before it was kept
        throw ConfigError("the checkpoint in " + folder.folder() + " was trained on a dataset of " +
                          std::to_string(start.dataset_size) + " samples, but this run's has " +
                          std::to_string(s.dataset_size) + "; resume with the same dataset (and --limit)");
      }
      // With a batch per worker, the batches of an epoch differ on another world size:
      // restart the epoch in progress. A global batch's steps are the data's own.
      if (start.world_size != group.size() && s.global_batch == 0) start.batch = 0;
    }
  }

  // Only after resume(), so that a checkpoint that cannot be resumed leaves the run folder as it was.
  void open_file_sinks() {
    if (!writes || group.rank() != 0 || s.file_sinks_added) return;
    const std::filesystem::path out(o.out_dir());
    std::filesystem::create_directories(out);
    s.sinks.push_back(json_lines_sink((out / "metrics.jsonl").string()));
    s.sinks.push_back(std::make_unique<PhaseSink>("train", csv_sink((out / "train.csv").string())));
    s.sinks.push_back(std::make_unique<PhaseSink>("val", csv_sink((out / "val.csv").string())));
    s.sinks.push_back(tensorboard_sink((out / "tensorboard").string()));
    s.file_sinks_added = true;
  }

  // Rank 0 decides whether the run logs its samples (its options rule: on a cluster, where
  // a resumed run's log is only on rank 0's disk, the others cannot tell) and opens the
  // log; every rank learns whether it could, so that a log that does not fit the
  // checkpoint resumed is one line on every rank.
  void open_sample_log(const data::PrefetchLoader& train) {
    torch::Tensor wanted = torch::tensor({static_cast<int64_t>(group.rank() == 0 && !o.sample_log().empty())});
    lockstep::broadcast(wanted, 0, group);
    logs_samples = wanted.item<int64_t>() != 0;
    if (!logs_samples) return;
    std::string error;
    if (group.rank() == 0) {
      try {
        const auto& sampler = train.sampler();
        const SampleLogHeader header{s.dataset_size, s.global_batch, sampler.options().seed()};
        sample_log = std::make_unique<SampleLogWriter>(o.sample_log(), header, start, group.size());
      } catch (const Error& e) {
        error = e.what();
      }
    }
    detail::throw_first_error(error, group);
  }

  // Step `step`'s samples, before its update: in live recovery a member that updates has
  // passed the step's agreement after this, so rank 0 has written the line by then.
  void log_samples(int64_t step, const data::Batch& batch) {
    if (!logs_samples) return;
    std::vector<int64_t> ids = gather_step_ids(batch.ids, group);
    if (!sample_log) return;
    sample_log->add_step(s.epoch + 1, step, std::move(ids));
    if (o.joiner_waiting()) sample_log->flush(/*durable=*/false);  // whoever is rank 0 next reads it
  }

  void save(int64_t epoch, int64_t batch) {
    timeline::Span span(timeline::format::event::kCheckpoint);
    if (writes) {
      if (sample_log) sample_log->flush(/*durable=*/true);  // the log always reaches the checkpoint
      save_collectively(folder, trained, {epoch, batch, s.step, group.size(), s.global_batch, s.dataset_size},
                        o.model_name());
    }
  }

  void end_epoch() {
    if (sample_log) sample_log->add_epoch_end(s.epoch + 1, s.step);
  }

  void flush_sample_log() {
    if (sample_log) sample_log->flush(/*durable=*/false);
  }

  // The epoch's steps from `batch_in_epoch`; the decision that stopped it, if one did.
  std::optional<CheckpointPolicy::Decision> run_epoch(data::PrefetchLoader& train, int64_t batch_in_epoch) {
    for (;;) {
      const double fetch_started_us = timeline_steps ? timeline::detail::now_us(lockstep::rank()) : 0;
      const auto fetch_started = Clock::now();
      auto host_batch = train.next();
      if (!host_batch) return std::nullopt;
      test_hooks::sleep_if_slowed(lockstep::rank(), "data");
      StepTimes times{s.step + 1, seconds_since(fetch_started)};
      for (auto* observer : observers) observer->batch_arrived(times.step, fetch_started_us);
      const auto compute_started = Clock::now();
      const data::Batch batch = on_device(*host_batch, s.device);
      if (s.global_batch > 0) s.step_samples = static_cast<int64_t>(train.sampler().step_samples(batch_in_epoch));
      const StepOutput out = trainer.train_step(batch);
      log_samples(s.step + 1, batch);
      s.prepare_update();  // before the commit: see apply_update
      const auto decision = policy->at_step(s.step + 1);
      s.batch_in_epoch = ++batch_in_epoch;
      {
        timeline::Span span(timeline::format::event::kOptimizerStep);
        s.apply_update();
      }
      times.compute_seconds = seconds_since(compute_started);
      times.gradient_wait_seconds = s.ddp->last_gradient_wait_seconds();
      for (auto* observer : observers) observer->updated(times);
      s.interval.add(out.output, batch.labels, out.loss);
      if (s.step % o.log_every() == 0) s.log_interval(train.waited());
      if (decision.save) save(s.epoch, batch_in_epoch);
      if (decision.asked_by_signal && !decision.stop && writes && group.rank() == 0) {
        std::cerr << "lockstep: wrote the checkpoint of step " << s.step << " that SIGUSR1 asked for; training goes on"
                  << std::endl;
      }
      for (auto* observer : observers) observer->step_ended(s.step);
      if (decision.stop) return decision;
    }
  }
};

FitResult Trainer::fit(data::PrefetchLoader& train, data::PrefetchLoader* validation) {
  FitRun run(*this, train);
  State& s = *state_;
  FitResult result;
  for (s.epoch = run.start.epoch; s.epoch < s.options.epochs(); ++s.epoch) {
    const bool resumed_epoch = s.epoch == run.start.epoch;
    s.batch_in_epoch = resumed_epoch ? run.start.batch : 0;
    train.set_epoch(s.epoch, static_cast<size_t>(s.batch_in_epoch));
    module().train();
    if (const auto stopped = run.run_epoch(train, s.batch_in_epoch)) {
      s.flush();
      run.flush_sample_log();
      result.steps = s.step;
      if (stopped->regroup) {  // the members change and fit() goes on: the timeline stays open
        result.regroup = true;
        return result;
      }
      run.fit_timeline->finish();
      result.stopped_early = true;
      result.preempted = stopped->preempted;
      return result;
    }
    run.end_epoch();
    if (!s.interval.empty()) s.log_interval(train.waited());
    if (validation != nullptr) {
      timeline::Span span(timeline::format::event::kValidation);
      result.validation = evaluate(*validation);
      s.emit(*result.validation);
    }
    run.save(s.epoch + 1, 0);
    s.flush();
  }
  run.flush_sample_log();
  run.fit_timeline->finish();
  result.steps = s.step;
  result.seconds = std::chrono::duration<double>(Clock::now() - s.started).count();
  return result;
}

}  // namespace lockstep::train
