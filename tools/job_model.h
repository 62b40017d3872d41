#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "job_data.h"
#include "lockstep/train/trainer.h"
#include "train_job.h"

namespace lockstep::tools {

// A worker's model and how to run it forward.
struct JobModel {
  std::shared_ptr<torch::nn::Module> module;
  train::Forward forward;
};

// --model: a built-in model made for the data's shape (initialised from --seed), or the
// TorchScript file loaded.
JobModel make_job_model(const TrainJob& job, const JobData& d);

// A scripted model must map a batch of the dataset's images to one logit per class;
// ConfigError naming the shapes when it does not. Built-in models always do.
void check_model_fits(const TrainJob& job, const JobData& d);

// --optimizer over `parameters`, with --lr, --momentum and --weight-decay.
std::shared_ptr<torch::optim::Optimizer> make_optimizer(const TrainJob& job,
                                                        const std::vector<torch::Tensor>& parameters);

// The run folder keeps the scripted model it started from, for `lockstep export`.
void keep_scripted_model(const TrainJob& job);

}  // namespace lockstep::tools
