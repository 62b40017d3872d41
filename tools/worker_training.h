#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "job_data.h"
#include "job_model.h"
#include "lockstep/train/trainer.h"
#include "train_job.h"

namespace lockstep::elastic {
class Membership;
}

namespace lockstep::tools {

// What a worker keeps for the whole job, whatever group it trains in: the model on its
// device and the optimizer over it.
struct WorkerModel {
  JobModel model;
  torch::Device device = torch::kCPU;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
};

WorkerModel make_worker_model(const TrainJob& job, const JobData& d);

// Training in the default group as it is now: the Trainer (its DistributedDataParallel
// bound to that group) and the loaders of this rank's share. `start`: live recovery's
// position to go on from; `joiner_waiting`: live recovery's question after each step.
class GroupTraining {
 public:
  GroupTraining(const TrainJob& job, const JobData& d, WorkerModel& worker,
                std::optional<train::TrainingPosition> start, std::function<bool()> joiner_waiting);
  train::FitResult fit() { return trainer_.fit(train_loader_, &val_loader_); }
  void save_checkpoint(const train::TrainingPosition& at) { trainer_.save_checkpoint(at); }
  std::optional<train::TrainingPosition> position() const { return trainer_.position(); }
  bool update_pending() const { return trainer_.update_pending(); }
  int64_t steps_per_epoch() const { return static_cast<int64_t>(train_loader_.batches_per_epoch()); }

 private:
  train::Trainer trainer_;
  data::PrefetchLoader train_loader_;
  data::PrefetchLoader val_loader_;
};

// Rank 0's first lines: what is about to run (model, data, workers, device, batches, run
// folder), and a warm-up the run is too short to finish.
void print_start(const TrainJob& job, const JobData& d, const WorkerModel& worker, const GroupTraining& training);

// "3 epochs", "1 worker".
std::string counted(int64_t count, const std::string& thing);

// "loss 0.3012, top-1 89.40%, top-5 99.80%": a validation as the run's last line and
// `lockstep eval` print it.
std::string validation_figures(const train::Record& validation);

// How a worker reads its share of the validation split, the transform aside.
data::LoaderOptions validation_loading(const TrainJob& job, torch::Device device);

// Rank 0's last lines on a fit that ended; the worker's exit status.
int report_fit(const TrainJob& job, const JobData& d, const train::FitResult& result);

// Live recovery's worker (lockstep train --recovery live): trains, and when a member is
// lost or a joiner waits, regroups with the members that go on, heals, and trains on.
int train_live(const TrainJob& job, const JobData& d, elastic::Membership& membership);

}  // namespace lockstep::tools
