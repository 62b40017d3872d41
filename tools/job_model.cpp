#include "job_model.h"

#include <filesystem>

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "lockstep/error.h"
#include "lockstep/comm/replicas.h"
#include "lockstep/ddp/scripted_module.h"
#include "lockstep/optim/sharded_optimizer.h"
#include "lockstep/train/models.h"

namespace lockstep::tools {

namespace fs = std::filesystem;

JobModel make_job_model(const TrainJob& job, const JobData& d) {
  if (job.scripted_model()) {
    // The executor's optimizations swap in their own derivative formulas after the first
    // runs, so a resumed run would step differently from one that never stopped. Unoptimized,
    // a scripted model computes with libtorch's own kernels and autograd, as a built-in one does.
    torch::jit::setGraphExecutorOptimize(false);
    auto scripted = load_scripted_module(job.model);
    return {scripted.ptr(), [scripted](const torch::Tensor& input) mutable { return scripted->forward(input); }};
  }
  torch::nn::Sequential model;
  // Replicas draw the initialisation from their own stream, as processes do from theirs.
  with_replica_generator([&] {
    torch::manual_seed(job.seed);
    model = train::make_model(job.model, train::ModelOptions()
                                             .in_channels(d.train_set->get(0).image.size(0))
                                             .num_classes(d.train_set->num_classes())
                                             .image_size(d.image_size));
  });
  return {model.ptr(), [model](const torch::Tensor& input) mutable { return model->forward(input); }};
}

void check_model_fits(const TrainJob& job, const JobData& d) {
  if (!job.scripted_model()) return;  // built-in models are made for the data's shape
  auto model = make_job_model(job, d);
  model.module->eval();
  data::Random random(job.seed);
  const auto input = d.val_transform(d.train_set->get(0).image, random).unsqueeze(0);
  torch::Tensor output;
  try {
    torch::NoGradGuard no_grad;
    output = model.forward(input);
  } catch (const c10::Error& error) {
    std::string reason = error.what_without_backtrace();
    throw ConfigError("--model " + job.model + " fails on a batch of " + job.dataset + " images shaped " +
                      c10::str(input.sizes()) + ": " + reason.substr(0, reason.find('\n')));
  }
  const int64_t classes = d.train_set->num_classes();
  if (output.dim() != 2 || output.size(1) != classes) {
    throw ConfigError("--model " + job.model + " maps a batch shaped " + c10::str(input.sizes()) + " to " +
                      c10::str(output.sizes()) + ", but " + job.dataset + " wants [N, " + std::to_string(classes) +
                      "] logits");
  }
}

namespace {

// Opt, or with --zero 1 or 2 Opt sharded across the workers.
template <typename Opt, typename Options>
std::shared_ptr<torch::optim::Optimizer> make(const TrainJob& job, const std::vector<torch::Tensor>& parameters,
                                              const Options& options) {
  if (job.zero >= 1) return std::make_shared<ShardedOptimizer<Opt>>(parameters, options);
  return std::make_shared<Opt>(parameters, options);
}

}  // namespace

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const TrainJob& job,
                                                        const std::vector<torch::Tensor>& parameters) {
  using namespace torch::optim;
  if (job.optimizer == "adam") return make<Adam>(job, parameters, AdamOptions(job.lr).weight_decay(job.weight_decay));
  if (job.optimizer == "adamw")
    return make<AdamW>(job, parameters, AdamWOptions(job.lr).weight_decay(job.weight_decay));
  return make<SGD>(job, parameters, SGDOptions(job.lr).momentum(job.momentum).weight_decay(job.weight_decay));
}

void keep_scripted_model(const TrainJob& job) {
  const fs::path kept = fs::path(job.run_folder()) / kScriptedModelFile;
  std::error_code error;
  fs::create_directories(job.run_folder(), error);
  if (!fs::exists(kept)) fs::copy_file(job.model, kept, error);
  if (error) throw Error("cannot copy " + job.model + " to " + kept.string() + ": " + error.message());
}

}  // namespace lockstep::tools
