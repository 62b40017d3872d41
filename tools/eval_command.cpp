#include "eval_command.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <torch/optim/sgd.h>

#include "job/malloc_tuning.h"
#include "job_data.h"
#include "job_model.h"
#include "lockstep/comm/init.h"
#include "lockstep/data/registry.h"
#include "lockstep/error.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/device.h"
#include "lockstep/train/trainer.h"
#include "run_config.h"
#include "worker_training.h"

namespace lockstep::tools {
namespace {

struct EvalRequest {
  std::string run;
  std::string checkpoint;  // default: the run's newest
  std::string split;       // default: the one the run validated on
  int workers = 1;
};

// The split as the run read it, so that its own validation split gives the run's figures:
// the run's --val-limit on it, --limit on train.
void choose_split(TrainJob& job, const std::string& split) {
  if (split.empty()) return;
  const std::string validated =
      !job.val_split.empty() ? job.val_split : data::held_out_split(job.datasets.load(job.dataset).at(job.dataset));
  if (split == validated) return;
  job.val_split = split;
  job.val_limit = split == "train" ? job.limit : 0;
}

int evaluate(const EvalRequest& request) {
  tune_malloc_here();  // as lockstep train's replicas have it
  TrainJob job = load_run_settings(request.run);
  choose_split(job, request.split);
  const std::string checkpoint =
      !request.checkpoint.empty() ? request.checkpoint : train::CheckpointFolder(job.checkpoint_folder(), 1).latest();
  if (checkpoint.empty()) throw ConfigError(request.run + " has no checkpoint yet in " + job.checkpoint_folder());
  const JobData data = open_job_data(job);
  std::optional<train::Record> result;
  double seconds = 0;
  on_replica_threads(job, request.workers, [&] {
    JobModel model = make_job_model(job, data);
    const torch::Device device = train::choose_device(job.device, lockstep::local_rank());
    model.module->to(device);
    train::load_model_weights(checkpoint, *model.module);
    // The Trainer's own evaluation, so that the figures are computed as the run's were; it
    // wants an optimizer, which never steps here.
    auto unused = std::make_shared<torch::optim::SGD>(model.module->parameters(), torch::optim::SGDOptions(0));
    train::Trainer trainer(model.module, model.forward, unused, train::cross_entropy_loss(),
                           train::TrainerOptions().autocast_bf16(job.precision == "bf16"));
    data::PrefetchLoader loader(data.val_set, validation_loading(job, device).transform(data.val_transform));
    const auto start = std::chrono::steady_clock::now();
    train::Record figures = trainer.evaluate(loader);
    if (lockstep::rank() == 0) {
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      result = std::move(figures);
    }
  });
  const double samples = result->value("samples");
  std::cout << job.model_label() << " on " << job.dataset << ", " << checkpoint << ": " << data.val_split << " "
            << validation_figures(*result) << " (" << static_cast<int64_t>(samples) << " samples on "
            << counted(request.workers, "worker") << ", " << static_cast<int64_t>(samples / seconds) << " samples/s)"
            << std::endl;
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, Action& chosen) {
  CLI::App* command = app.add_subcommand(
      "eval",
      "Loss, top-1 and top-5 of a run's newest checkpoint (or --checkpoint) over a split, as the run computed them");
  auto request = std::make_shared<EvalRequest>();
  command->add_option("RUN", request->run, "The run's folder (lockstep train --out), or its s3://BUCKET/PREFIX")
      ->required();
  command->add_option("--checkpoint", request->checkpoint, "A checkpoint file (default: the run's newest)");
  command->add_option("--split", request->split, "val, test or train (default: the split the run validated on)")
      ->check(CLI::IsMember({"val", "test", "train"}));
  command->add_option("-n,--workers", request->workers, "Workers, as replicas on threads of this process")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->callback([=, &chosen] { chosen = [=] { return evaluate(*request); }; });
}

}  // namespace lockstep::tools
