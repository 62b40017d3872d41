#include "train_job.h"

#include <sysexits.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include "job_data.h"
#include "job_model.h"
#include "worker_training.h"
#include "comm/groups/regroup.h"
#include "elastic/membership.h"
#include "rank_hosts.h"
#include "run_config.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/comm/replicas.h"
#include "job/cpu_topology.h"
#include "job/malloc_tuning.h"
#include "launch/launch_options.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/device.h"
#include "lockstep/train/models.h"
#include "s3/s3_url.h"
#include "lockstep/train/trainer.h"

namespace lockstep::tools {
namespace {

namespace fs = std::filesystem;

data::SamplerOptions sampler_options(const TrainJob& job) {
  return data::SamplerOptions()
      .batch_size(static_cast<size_t>(job.batch_size))
      .global_batch_size(static_cast<size_t>(job.global_batch_size))
      .seed(job.seed);
}

// The device of the worker of `local_rank`; the library's error names the choice, the user
// gave it as --device.
torch::Device device_of(const std::string& choice, int local_rank) {
  try {
    return train::choose_device(choice, local_rank);
  } catch (const ConfigError& e) {
    throw ConfigError("--device " + std::string(e.what()));
  }
}

}  // namespace

std::string counted(int64_t count, const std::string& thing) {
  return std::to_string(count) + " " + thing + (count == 1 ? "" : "s");
}

namespace {

// 1234567 as "1,234,567".
std::string grouped(int64_t count) {
  std::string digits = std::to_string(count);
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<size_t>(at), ",");
  return digits;
}

}  // namespace

void print_start(const TrainJob& job, const JobData& d, const WorkerModel& worker, const GroupTraining& training) {
  if (lockstep::rank() != 0) return;
  int64_t parameters = 0;
  for (const auto& p : worker.model.module->parameters()) parameters += p.numel();
  const int workers = lockstep::world_size();
  const std::string batches = job.global_batch_size > 0
                                  ? "global batches of " + std::to_string(job.global_batch_size)
                                  : "batches of " + std::to_string(job.batch_size) + " a worker (" +
                                        std::to_string(job.batch_size * workers) + " a step)";
  const int64_t steps = job.epochs * training.steps_per_epoch();
  std::cout << "lockstep train: " << job.model_label() << " (" << grouped(parameters) << " parameters) on "
            << job.dataset << " (" << grouped(static_cast<int64_t>(d.train_set->size())) << " train, "
            << grouped(static_cast<int64_t>(d.val_set->size())) << " " << d.val_split << "), "
            << counted(workers, "worker") << " (" << job.mode << (malloc_tuned() ? ", malloc keeps freed memory" : "")
            << ") on " << (worker.device.is_cuda() ? "GPUs" : "the CPU") << (job.precision == "bf16" ? " in bf16" : "")
            << ", " << batches << ", " << counted(steps, "step") << "; run in " << job.run_folder() << std::endl;
  if (job.warmup_steps > steps) {
    std::cout << "lockstep train: --warmup-steps " << job.warmup_steps << " is longer than the run's "
              << counted(steps, "step") << ": the learning rate is still warming up to --lr " << job.lr
              << " when the run ends" << std::endl;
  }
}

std::string validation_figures(const train::Record& validation) {
  char text[96];
  std::snprintf(text, sizeof text, "loss %.4f, top-1 %.2f%%, top-5 %.2f%%", validation.value("loss"),
                100 * validation.value("top1"), 100 * validation.value("top5"));
  return text;
}

data::LoaderOptions validation_loading(const TrainJob& job, torch::Device device) {
  return data::LoaderOptions()
      .sampler(sampler_options(job).shuffle(false).even(false).global_batch_size(0))
      .threads(job.threads)
      .pin_memory(device.is_cuda());  // pinned batches reach the GPU without blocking
}

void TrainJob::add_options(CLI::App& command) {
  auto flags = flags_.declaring(command, *this);
  flags.option("--dataset", &TrainJob::dataset, "Registry name of the dataset")->capture_default_str();
  flags.option("--model", &TrainJob::model, "mlp, cnn, resnet18, resnet34, resnet50, or a TorchScript file (FILE.pt)")
      ->capture_default_str();
  workers_option =
      flags
          .option("-n,--workers,--nproc-per-node", &TrainJob::workers,
                  "Workers on this machine; MIN:MAX starts MAX and trains on while MIN are left (--recovery live)")
          ->transform([this](std::string text) { return launch::take_min("-n", text, min_workers); })
          ->capture_default_str();
  mode_option =
      flags.option("--mode", &TrainJob::mode, "threads (replicas in one process) or processes (one per worker)")
          ->check(CLI::IsMember({"threads", "processes"}))
          ->capture_default_str();
  flags
      .option("--device", &TrainJob::device,
              "auto (cuda when a GPU is visible), cpu, cuda (a GPU per worker, by local rank) or cuda:N")
      ->capture_default_str();
  flags.option("--precision", &TrainJob::precision, "fp32, or bf16 (mixed precision through autocast)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  flags.option("--epochs", &TrainJob::epochs, "Epochs")->capture_default_str();
  flags.option("--batch-size", &TrainJob::batch_size, "Examples per batch and worker")->capture_default_str();
  flags.option("--global-batch-size", &TrainJob::global_batch_size,
               "Examples per step over all workers, instead of --batch-size per worker: the same training on any "
               "number of workers, and a checkpoint that resumes mid-epoch on another");
  flags.option("--optimizer", &TrainJob::optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  lr_option =
      flags.option("--lr", &TrainJob::lr, "Base learning rate (default: 0.05 for sgd, 0.001 for adam and adamw)");
  flags.option("--momentum", &TrainJob::momentum, "SGD momentum")->capture_default_str();
  weight_decay_option = flags.option("--weight-decay", &TrainJob::weight_decay,
                                     "Weight decay (default: 5e-4 for sgd, 0 for adam, 0.01 for adamw)");
  flags.option("--schedule", &TrainJob::schedule, "constant, step or cosine")
      ->check(CLI::IsMember({"constant", "step", "cosine"}))
      ->capture_default_str();
  flags.option("--warmup-steps", &TrainJob::warmup_steps, "Linear warm-up steps")->capture_default_str();
  flags.option("--clip-grad-norm", &TrainJob::clip_grad_norm, "Clip gradients to this global norm (0: off)");
  flags
      .option("--zero", &TrainJob::zero,
              "1: shard the optimizer state across the workers (ZeRO stage 1); 2: the gradients too (ZeRO "
              "stage 2); 0: every worker keeps all of both")
      ->check(CLI::IsMember({0, 1, 2}))
      ->capture_default_str();
  flags
      .option("--bucket-cap-mb", &TrainJob::bucket_cap_mb,
              "Gradient bucket size of DistributedDataParallel, in MiB "
              "(the first bucket at most 1)")
      ->capture_default_str();
  flags.flag("--gradient-as-bucket-view,!--no-gradient-as-bucket-view", &TrainJob::gradient_as_bucket_view,
             "Each gradient a view into its bucket (the default): no copy out of the reduced buckets, one copy "
             "of the gradients in memory, the same bits (--no-gradient-as-bucket-view: copied out, PyTorch's "
             "default)");
  flags.flag("--scale-lr", &TrainJob::scale_lr, "Multiply the learning rate by the world size");
  flags.flag("--augment", &TrainJob::augment, "Random crops and flips of small images");
  flags
      .option("--bind", &TrainJob::bind,
              "core: each worker (process or replica thread) on a physical core of its own; none: no "
              "pinning (default: none on a GPU, else core when there are enough cores)")
      ->check(CLI::IsMember({"core", "none"}));
  flags.flag("--timeline", &TrainJob::timeline,
             "Record every rank's steps, buckets and collectives into RUN/timeline.json (Perfetto, "
             "chrome://tracing; lockstep timeline summary)");
  flags.flag("--sample-log", &TrainJob::sample_log,
             "Write the ids of every step's samples to RUN/samples.log, appended across resumes (lockstep data "
             "audit RUN says whether each epoch trained every sample once)");
  flags.flag("--deterministic", &TrainJob::deterministic,
             "Deterministic kernels, so that a GPU run resumes bit-exactly (slower on a GPU)");
  flags.flag("--malloc-tuning,!--no-malloc-tuning", &TrainJob::malloc_tuning,
             "glibc's malloc keeps freed memory for the next step instead of returning it to the system, in this "
             "process and the workers it starts (the default; about 1.7x faster CPU steps in a process; "
             "--no-malloc-tuning or LOCKSTEP_MALLOC_TUNING=0: glibc's defaults). A MALLOC_*_, GLIBC_TUNABLES or "
             "LD_PRELOAD of one's own is kept");
  flags.option("--out", &TrainJob::out,
               "Run folder (default: runs/DATASET-MODEL-TIME), or s3://BUCKET/PREFIX for the checkpoints");
  flags.flag("--resume", &TrainJob::resume, "Continue from the newest checkpoint in --out (default: the newest run)");
  flags.option("--seed", &TrainJob::seed, "Seed of the model's initialisation and the data order")
      ->capture_default_str();
  threads_option = flags.option("--threads", &TrainJob::threads,
                                "Loader threads per worker (default 1, or on GPUs "
                                "the cores shared among the workers, up to 8)");
  flags.option("--log-every", &TrainJob::log_every, "Steps between logged metrics")->capture_default_str();
  flags.option("--checkpoint-every", &TrainJob::checkpoint_every,
               "Steps between checkpoints, besides every epoch's end (0: at epoch ends only)");
  flags.option("--keep", &TrainJob::keep, "Checkpoints kept")->capture_default_str();
  flags.option("--limit", &TrainJob::limit, "Train on the first N examples only");
  flags.option("--val-limit", &TrainJob::val_limit, "Validate on the first N examples only");
  flags.option("--val-split", &TrainJob::val_split, "Split to validate on (default: val, else test)");
  flags.option("--stop-after-step", &TrainJob::stop_after_step,
               "End after this step and its checkpoint, as if interrupted");
  // The launcher's, not the workers'.
  flags.kept("--max-restarts", &TrainJob::max_restarts,
             "Restart every worker after one fails, up to N times, resuming from the newest checkpoint "
             "(implies --mode processes)");
  recovery_option =
      flags
          .kept("--recovery", &TrainJob::recovery,
                "live: when a worker fails the others go on without restarting, and it is started again (up to "
                "--max-restarts times) to rejoin them, healed from them; restart: every worker starts again from "
                "the newest checkpoint (implies --mode processes; live needs --global-batch-size)")
          ->check(CLI::IsMember({"live", "restart"}))
          ->capture_default_str();
  flags
      .kept("--heartbeat-timeout", &TrainJob::heartbeat_timeout,
            "Processes mode: seconds without a worker's heartbeats after which it is named as hung")
      ->capture_default_str();
  datasets.add_to(command);
  // `lockstep train --help` lists them in groups, each where its first flag was declared.
  const std::vector<std::pair<std::string, std::vector<std::string>>> groups = {
      {"Model and data",
       {"--model", "--precision", "--seed", "--dataset", "--data-toml", "--data-path", "--limit", "--val-limit",
        "--val-split", "--augment", "--threads"}},
      {"Optimization",
       {"--epochs", "--batch-size", "--global-batch-size", "--optimizer", "--lr", "--momentum", "--weight-decay",
        "--schedule", "--warmup-steps", "--clip-grad-norm", "--scale-lr"}},
      {"Distribution",
       {"--workers", "--mode", "--device", "--zero", "--bucket-cap-mb", "--gradient-as-bucket-view", "--bind",
        "--deterministic", "--malloc-tuning"}},
      {"Fault tolerance",
       {"--resume", "--checkpoint-every", "--keep", "--stop-after-step", "--max-restarts", "--recovery",
        "--heartbeat-timeout"}},
      {"Output", {"--out", "--config", "--log-every", "--timeline", "--sample-log"}},
  };
  for (const auto& [group, names] : groups) {
    for (const auto& name : names) {
      if (CLI::Option* option = command.get_option_no_throw(name)) option->group(group);
    }
  }
}

void TrainJob::resolve_defaults() {
  const bool gpu_job = on_gpu();
  // One worker per visible GPU, as torchrun users set --nproc-per-node.
  if ((workers_option == nullptr || workers_option->count() == 0) && gpu_job) workers = train::visible_gpus();
  if (threads_option == nullptr || threads_option->count() == 0) {
    threads = launch::loader_threads_by_default(gpu_job, static_cast<int>(allowed_cpus().size()), workers);
  }
  const bool sgd = optimizer == "sgd";
  if (lr_option == nullptr || lr_option->count() == 0) lr = sgd ? 0.05 : 1e-3;
  if (weight_decay_option == nullptr || weight_decay_option->count() == 0) {
    weight_decay = sgd ? 5e-4 : optimizer == "adamw" ? 0.01 : 0;
  }
}

bool TrainJob::on_gpu() const { return device_of(device, 0).is_cuda(); }

bool TrainJob::scripted_model() const {
  const fs::path path(model);
  return path.extension() == ".pt" || path.extension() == ".pth" || model.find('/') != std::string::npos;
}

std::string TrainJob::model_label() const { return scripted_model() ? fs::path(model).stem().string() : model; }

void TrainJob::check() const {
  if (workers < 1) throw ConfigError("-n must be at least 1, got " + std::to_string(workers));
  if (epochs < 1) throw ConfigError("--epochs must be at least 1, got " + std::to_string(epochs));
  if (batch_size < 1) throw ConfigError("--batch-size must be at least 1, got " + std::to_string(batch_size));
  if (global_batch_size < 0) {
    throw ConfigError("--global-batch-size must be at least 1 (or 0 for --batch-size per worker), got " +
                      std::to_string(global_batch_size));
  }
  if (lr <= 0) throw ConfigError("--lr must be positive, got " + argument_of(lr));
  if (threads < 0) throw ConfigError("--threads must not be negative");
  if (heartbeat_timeout <= 0)
    throw ConfigError("--heartbeat-timeout must be positive, got " + argument_of(heartbeat_timeout));
  if (max_restarts < 0) throw ConfigError("--max-restarts must not be negative, got " + std::to_string(max_restarts));
  if (max_restarts > 0 && mode == "threads") {
    throw ConfigError(
        "--max-restarts restarts worker processes, but --mode threads runs the workers inside this "
        "one; leave out --mode threads");
  }
  if (recovery == "live") {
    if (zero == 2) {
      throw ConfigError(
          "--zero 2 keeps each worker's share of the gradients only, but --recovery live needs each share on two "
          "workers; use --zero 1 with --recovery live");
    }
    if (mode == "threads") {
      throw ConfigError(
          "--recovery live goes on in the worker processes that are left, but --mode threads runs "
          "the workers inside this one; leave out --mode threads");
    }
    if (global_batch_size == 0) {
      throw ConfigError(
          "--recovery live trains on with fewer or more workers, so a step must not depend on "
          "their number: give --global-batch-size (e.g. " +
          std::to_string(batch_size * workers) + ", --batch-size times -n)");
    }
  }
  if (weight_decay < 0) throw ConfigError("--weight-decay must not be negative, got " + argument_of(weight_decay));
  if (bucket_cap_mb <= 0) throw ConfigError("--bucket-cap-mb must be positive, got " + argument_of(bucket_cap_mb));
  on_gpu();  // says why CUDA cannot be used, before any worker starts
  check_model();
  check_out();
}

void TrainJob::check_model() const {
  if (scripted_model()) {
    if (!fs::is_regular_file(model) || !std::ifstream(model))
      throw ConfigError("--model " + model + ": no such readable file");
    return;
  }
  const auto& names = train::model_names();
  if (std::find(names.begin(), names.end(), model) == names.end()) {
    std::string known;
    for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
    throw ConfigError("--model " + model + " is unknown (known: " + known + ", or a TorchScript file FILE.pt)");
  }
}

void TrainJob::check_out() const {
  // A worker that joins a live job in progress (started again, or its node came later) joins
  // the run whose checkpoints these are.
  const char* joins = std::getenv("LOCKSTEP_JOINS");
  if (out.empty() || resume || (joins != nullptr && std::string(joins) == "1")) return;
  const bool taken = s3::is_s3_url(out) ? !train::CheckpointFolder(checkpoint_folder(), 1).latest().empty()
                                        : fs::exists(fs::path(out) / "checkpoints");
  if (taken) {
    throw ConfigError(out + " already holds a run's checkpoints; add --resume to continue it, or choose another --out");
  }
}

std::string TrainJob::run_folder() const {
  if (!s3::is_s3_url(out)) return out;
  const s3::S3Url url = s3::parse_s3_url(out);
  std::string name = "s3-" + url.bucket + (url.key.empty() ? "" : "-" + url.key);
  std::replace(name.begin(), name.end(), '/', '-');
  return "runs/" + name;
}

std::string TrainJob::checkpoint_folder() const { return out + "/checkpoints"; }

std::string TrainJob::sample_log_path() const { return (fs::path(run_folder()) / "samples.log").string(); }

void TrainJob::continue_sample_log() {
  if (resume && fs::exists(sample_log_path())) sample_log = true;
}

std::string TrainJob::default_out(const std::string& stamp) const {
  return "runs/" + dataset + "-" + model_label() + "-" + stamp;
}

std::string TrainJob::newest_run() const {
  const std::string prefix = dataset + "-" + model_label() + "-";
  std::string newest;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("runs", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && (fs::path("runs") / name).string() > newest)
      newest = (fs::path("runs") / name).string();
  }
  if (newest.empty())
    throw ConfigError("--resume found no runs/" + prefix + "* folder; give the run's folder with --out");
  return newest;
}

std::vector<std::string> TrainJob::as_arguments() const {
  std::vector<std::string> arguments = flags_.arguments(*this);
  const auto registry = datasets.as_arguments();
  arguments.insert(arguments.end(), registry.begin(), registry.end());
  return arguments;
}

std::vector<NamedSetting> TrainJob::settings() const {
  std::vector<NamedSetting> settings = flags_.values(*this);
  const auto registry = datasets.values();
  settings.insert(settings.end(), registry.begin(), registry.end());
  return settings;
}

namespace {

// With LOCKSTEP_TIMING set, rank 0 prints when it reached each phase of its start, on the
// steady clock every process of the machine shares (bench/recovery times restarts by it).
void report_timing(const char* phase) {
  if (std::getenv("LOCKSTEP_TIMING") == nullptr) return;
  const char* rank = std::getenv("RANK");
  if (rank != nullptr && std::string(rank) != "0") return;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  std::cout << "lockstep train timing: " << phase << " at "
            << std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() << " ns" << std::endl;
}

// One worker's training, in the default group (a process's or a replica's); the exit status.
int train_worker(const TrainJob& job, const JobData& d) {
  WorkerModel worker = make_worker_model(job, d);
  GroupTraining training(job, d, worker, std::nullopt, nullptr);
  print_start(job, d, worker, training);
  return report_fit(job, d, training.fit());
}

}  // namespace

WorkerModel make_worker_model(const TrainJob& job, const JobData& d) {
  if (job.scripted_model() && lockstep::rank() == 0) keep_scripted_model(job);
  if (job.deterministic) train::use_deterministic_algorithms();
  WorkerModel worker{make_job_model(job, d), device_of(job.device, lockstep::local_rank()), nullptr};
  // cuDNN times its algorithms for each shape and keeps the fastest, as PyTorch's ImageNet
  // recipe asks: a few percent for convolutional models, whose shapes repeat every step.
  if (worker.device.is_cuda() && !job.deterministic) at::globalContext().setBenchmarkCuDNN(true);
  worker.model.module->to(worker.device);
  worker.optimizer = make_optimizer(job, worker.model.module->parameters());
  return worker;
}

namespace {

train::TrainerOptions trainer_options(const TrainJob& job) {
  auto options = train::TrainerOptions()
                     .epochs(job.epochs)
                     .lr(job.lr)
                     .scale_lr_by_world_size(job.scale_lr)
                     .schedule(train::ScheduleOptions().kind(job.schedule).warmup_steps(job.warmup_steps))
                     .log_every(job.log_every)
                     .out_dir(job.run_folder())
                     .checkpoint_dir(job.checkpoint_folder())
                     .checkpoint_every(job.checkpoint_every)
                     .keep_checkpoints(job.keep)
                     .resume(job.resume)
                     .stop_after_step(job.stop_after_step)
                     .handle_signals(true)
                     .model_name(job.model_label())
                     .autocast_bf16(job.precision == "bf16")
                     .timeline(job.timeline)
                     .sample_log(job.sample_log ? job.sample_log_path() : "")
                     .shard_gradients(job.zero == 2)
                     .ddp(DDPOptions()
                              .bucket_cap_mb(job.bucket_cap_mb)
                              .gradient_as_bucket_view(job.gradient_as_bucket_view)
                              .first_bucket_cap_mb(std::min(DDPOptions().first_bucket_cap_mb(), job.bucket_cap_mb)));
  if (job.clip_grad_norm > 0) options.clip_grad_norm(job.clip_grad_norm);
  return options;
}

}  // namespace

GroupTraining::GroupTraining(const TrainJob& job, const JobData& d, WorkerModel& worker,
                             std::optional<train::TrainingPosition> start, std::function<bool()> joiner_waiting)
    : trainer_(worker.model.module, worker.model.forward, worker.optimizer, train::cross_entropy_loss(),
               trainer_options(job).start_at(start).joiner_waiting(std::move(joiner_waiting))),
      // Pinned batches reach the GPU without blocking.
      train_loader_(d.train_set, data::LoaderOptions()
                                     .sampler(sampler_options(job))
                                     .transform(d.train_transform)
                                     .threads(job.threads)
                                     .pin_memory(worker.device.is_cuda())),
      val_loader_(d.val_set, validation_loading(job, worker.device).transform(d.val_transform)) {
  if (lockstep::rank() == 0) trainer_.add_sink(train::console_sink(std::cout, train::interactive_console()));
}

int report_fit(const TrainJob& job, const JobData& d, const train::FitResult& result) {
  if (lockstep::rank() == 0) {
    if (result.preempted) {
      std::cout << "preempted: stopped after step " << result.steps << " and saved its checkpoint; continue with: "
                << "lockstep train --out " << job.out << " --resume" << std::endl;
    } else if (result.stopped_early) {
      std::cout << "stopped after step " << result.steps << "; continue with: lockstep train --out " << job.out
                << " --resume" << std::endl;
    } else if (result.validation) {
      std::cout << job.model_label() << " on " << job.dataset << " after " << counted(job.epochs, "epoch") << " on "
                << counted(lockstep::world_size(), "worker") << " in " << static_cast<int64_t>(result.seconds)
                << " s: validation " << validation_figures(*result.validation) << " (" << d.val_split
                << " split); run in " << job.run_folder()
                << (s3::is_s3_url(job.out) ? ", checkpoints in " + job.checkpoint_folder() : "") << std::endl;
    }
  }
  // EX_TEMPFAIL, "try again later": what schedulers that requeue a job look for.
  return result.preempted ? EX_TEMPFAIL : 0;
}

int run_train_job(const TrainJob& job) {
  report_timing("started");
  const auto membership = elastic::Membership::from_environment();
  if (membership && membership->joiner()) {
    // Started again by its launcher, or on a node that came later, while the others train on:
    // it joins them at a step's end.
    const JobData data = open_job_data(job);
    if (!membership->wait_for_admission()) {
      std::cout << "lockstep: worker " << membership->me().id << " came to join, and found the job done" << std::endl;
      return 0;
    }
    detail::regroup(membership->me().id, membership->rank(), static_cast<int>(membership->members().size()),
                    membership->generation());
    const int status = train_live(job, data, *membership);
    lockstep::shutdown();
    return status;
  }
  lockstep::init();
  report_timing("joined");
  const std::string hosts = ranks_on_hosts();
  if (!hosts.empty() && lockstep::rank() == 0) std::cout << hosts << std::endl;
  // Under live recovery the first generation may hold fewer (--nnodes MIN:MAX).
  if (!membership && job.workers_option != nullptr && job.workers_option->count() > 0 &&
      job.workers != lockstep::world_size()) {
    throw ConfigError("-n " + std::to_string(job.workers) + " does not match this launch's world size " +
                      std::to_string(lockstep::world_size()) + "; leave -n out inside mpirun or torchrun");
  }
  if (job.mode_option != nullptr && job.mode_option->count() > 0 && job.mode == "threads" &&
      lockstep::world_size() > 1) {
    throw ConfigError(
        "--mode threads runs the workers inside one process, but this process is one rank of a "
        "launched job; leave --mode out inside mpirun or torchrun");
  }
  const auto train = [&] {
    const JobData data = open_job_data(job);
    report_timing("data");
    return membership ? train_live(job, data, *membership) : train_worker(job, data);
  };
  // Started by a launcher other than lockstep train's (torchrun, mpirun, srun): rank 0
  // keeps the run's settings.
  const bool keeps_settings =
      lockstep::rank() == 0 && !job.out.empty() && std::getenv(kRunConfigSavedVariable) == nullptr;
  const int status = keeps_settings ? train_keeping_run_config(job, train) : train();
  lockstep::shutdown();
  return status;
}

void TrainJob::check_before_launch() const { check_model_fits(*this, open_job_data(*this)); }

void on_replica_threads(const TrainJob& job, int workers, const std::function<void()>& body) {
  // The intra-op threads the launcher would give each worker process (OMP_NUM_THREADS, or
  // one each beside other workers), so that both modes compute the same bits.
  const bool threads_chosen = std::getenv("OMP_NUM_THREADS") != nullptr;
  const int threads = workers > 1 && !threads_chosen ? 1 : at::get_num_threads();
  try {
    run_replicas(
        workers, [&](ProcessGroup) { body(); },
        ReplicaOptions().threads(threads).bind_cores(launch::binding_by_default(job.bind, job.on_gpu()) != "none"));
  } catch (const ReplicaError& e) {
    // As a worker process would say it, without the library's own names.
    const std::string prefix = "lockstep: ";
    const std::string& reason = e.reason();
    throw Error("worker " + std::to_string(e.replica()) + ": " +
                (reason.rfind(prefix, 0) == 0 ? reason.substr(prefix.size()) : reason));
  }
}

int run_train_replicas(const TrainJob& job) {
  const JobData data = open_job_data(job);
  check_model_fits(job, data);
  // Once its data and model are known to work.
  return train_keeping_run_config(job, [&] {
    int status = 0;
    on_replica_threads(job, job.workers, [&] {
      const int mine = train_worker(job, data);
      if (lockstep::rank() == 0) status = mine;  // every replica stops at the same step
    });
    return status;
  });
}

}  // namespace lockstep::tools
