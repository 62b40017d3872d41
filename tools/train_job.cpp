#include "train_job.h"

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
#include "rank_hosts.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/comm/replicas.h"
#include "comm/world/cpu_topology.h"
#include "launch/launch_options.h"
#include "lockstep/train/device.h"
#include "lockstep/train/models.h"
#include "lockstep/train/trainer.h"

namespace lockstep::tools {
namespace {

namespace fs = std::filesystem;

// Every digit, so that the workers get exactly the value the user gave.
std::string exact(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f%%", 100 * fraction);
  return text;
}

}  // namespace

void TrainJob::add_options(CLI::App& command) {
  command.add_option("--dataset", dataset, "Registry name of the dataset")->capture_default_str();
  command.add_option("--model", model, "mlp, cnn, resnet18, resnet34, resnet50, or a TorchScript file (FILE.pt)")
      ->capture_default_str();
  workers_option = command.add_option("-n,--workers", workers, "Workers on this machine")->capture_default_str();
  mode_option = command.add_option("--mode", mode, "threads (replicas in one process) or processes (one per worker)")
                    ->check(CLI::IsMember({"threads", "processes"}))
                    ->capture_default_str();
  command.add_option("--device", device, "auto (cuda when a GPU is visible), cpu, cuda (a GPU per worker, by local rank) or cuda:N")
      ->capture_default_str();
  command.add_option("--precision", precision, "fp32, or bf16 (mixed precision through autocast)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  command.add_option("--epochs", epochs, "Epochs")->capture_default_str();
  command.add_option("--batch-size", batch_size, "Examples per batch and worker")->capture_default_str();
  command.add_option("--optimizer", optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  lr_option = command.add_option("--lr", lr, "Base learning rate (default: 0.05 for sgd, 0.001 for adam and adamw)");
  command.add_option("--momentum", momentum, "SGD momentum")->capture_default_str();
  weight_decay_option = command.add_option("--weight-decay", weight_decay,
                                           "Weight decay (default: 5e-4 for sgd, 0 for adam, 0.01 for adamw)");
  command.add_option("--schedule", schedule, "constant, step or cosine")
      ->check(CLI::IsMember({"constant", "step", "cosine"}))
      ->capture_default_str();
  command.add_option("--warmup-steps", warmup_steps, "Linear warm-up steps")->capture_default_str();
  command.add_option("--clip-grad-norm", clip_grad_norm, "Clip gradients to this global norm (0: off)");
  command.add_option("--zero", zero, "1: shard the optimizer state across the workers (ZeRO stage 1); 0: every worker "
                     "keeps all of it")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  command.add_option("--bucket-cap-mb", bucket_cap_mb, "Gradient bucket size of DistributedDataParallel, in MiB (the first "
                     "bucket at most 1)")->capture_default_str();
  command.add_option("--scale-lr", scale_lr, "Multiply the learning rate by the world size");
  command.add_flag("--augment", augment, "Random crops and flips of small images");
  command.add_option("--bind", bind,
                     "core: each worker (process or replica thread) on a physical core of its own; none: no "
                     "pinning (default: none on a GPU, else core when there are enough cores)")
      ->check(CLI::IsMember({"core", "none"}));
  command.add_flag("--timeline", timeline,
                   "Record every rank's steps, buckets and collectives into RUN/timeline.json (Perfetto, "
                   "chrome://tracing; lockstep timeline summary)");
  command.add_flag("--deterministic", deterministic,
                   "Deterministic kernels, so that a GPU run resumes bit-exactly (slower on a GPU)");
  command.add_option("--out", out, "Run folder (default: runs/DATASET-MODEL-TIME)");
  command.add_flag("--resume", resume, "Continue from the newest checkpoint in --out (default: the newest run)");
  command.add_option("--seed", seed, "Seed of the model's initialisation and the data order")->capture_default_str();
  threads_option = command.add_option(
      "--threads", threads, "Loader threads per worker (default 1, or on GPUs the cores shared among the workers, up to 8)");
  command.add_option("--log-every", log_every, "Steps between logged metrics")->capture_default_str();
  command.add_option("--checkpoint-every", checkpoint_every, "Steps between checkpoints, besides epoch ends (0: none)");
  command.add_option("--keep", keep, "Checkpoints kept")->capture_default_str();
  command.add_option("--limit", limit, "Train on the first N examples only");
  command.add_option("--val-limit", val_limit, "Validate on the first N examples only");
  command.add_option("--val-split", val_split, "Split to validate on (default: val, else test)");
  command.add_option("--stop-after-step", stop_after_step, "End after this step and its checkpoint, as if interrupted");
  command.add_option("--max-restarts", max_restarts,
                     "Restart every worker after one fails, up to N times, resuming from the newest checkpoint "
                     "(implies --mode processes)");
  command.add_option("--heartbeat-timeout", heartbeat_timeout,
                     "Processes mode: seconds without a worker's heartbeats after which it is named as hung")
      ->capture_default_str();
  datasets.add_to(command);
}

void TrainJob::resolve_defaults() {
  const bool gpu_job = train::choose_device(device, 0).is_cuda();
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

bool TrainJob::scripted_model() const {
  const fs::path path(model);
  return path.extension() == ".pt" || path.extension() == ".pth" || model.find('/') != std::string::npos;
}

std::string TrainJob::model_label() const { return scripted_model() ? fs::path(model).stem().string() : model; }

void TrainJob::check() const {
  if (workers < 1) throw ConfigError("-n must be at least 1, got " + std::to_string(workers));
  if (epochs < 1) throw ConfigError("--epochs must be at least 1, got " + std::to_string(epochs));
  if (batch_size < 1) throw ConfigError("--batch-size must be at least 1, got " + std::to_string(batch_size));
  if (lr <= 0) throw ConfigError("--lr must be positive, got " + exact(lr));
  if (threads < 0) throw ConfigError("--threads must not be negative");
  if (heartbeat_timeout <= 0) throw ConfigError("--heartbeat-timeout must be positive, got " + exact(heartbeat_timeout));
  if (max_restarts < 0) throw ConfigError("--max-restarts must not be negative, got " + std::to_string(max_restarts));
  if (max_restarts > 0 && mode == "threads") {
    throw ConfigError("--max-restarts restarts worker processes, but --mode threads runs the workers inside this "
                      "one; leave out --mode threads");
  }
  if (weight_decay < 0) throw ConfigError("--weight-decay must not be negative, got " + exact(weight_decay));
  if (bucket_cap_mb <= 0) throw ConfigError("--bucket-cap-mb must be positive, got " + exact(bucket_cap_mb));
  train::choose_device(device, 0);  // says why CUDA cannot be used, before any worker starts
  check_model();
  check_out();
}

void TrainJob::check_model() const {
  if (scripted_model()) {
    if (!fs::is_regular_file(model) || !std::ifstream(model)) throw ConfigError("--model " + model + ": no such readable file");
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
  if (!out.empty() && !resume && fs::exists(fs::path(out) / "checkpoints")) {
    throw ConfigError(out + " already holds a run's checkpoints; add --resume to continue it, or choose another --out");
  }
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
    if (name.rfind(prefix, 0) == 0 && (fs::path("runs") / name).string() > newest) newest = (fs::path("runs") / name).string();
  }
  if (newest.empty()) throw ConfigError("--resume found no runs/" + prefix + "* folder; give the run's folder with --out");
  return newest;
}

std::vector<std::string> TrainJob::as_arguments() const {
  std::vector<std::string> a = {"--dataset", dataset, "--model", model, "--workers", std::to_string(workers),
                                "--mode", mode, "--device", device, "--precision", precision,
                                "--optimizer", optimizer,
                                "--epochs", std::to_string(epochs), "--batch-size", std::to_string(batch_size),
                                "--lr", exact(lr), "--momentum", exact(momentum),
                                "--weight-decay", exact(weight_decay), "--schedule", schedule,
                                "--warmup-steps", std::to_string(warmup_steps), "--clip-grad-norm", exact(clip_grad_norm),
                                "--zero", std::to_string(zero),
                                "--bucket-cap-mb", exact(bucket_cap_mb),
                                "--scale-lr", scale_lr ? "true" : "false", "--out", out, "--seed", std::to_string(seed),
                                "--threads", std::to_string(threads), "--log-every", std::to_string(log_every),
                                "--checkpoint-every", std::to_string(checkpoint_every), "--keep", std::to_string(keep),
                                "--limit", std::to_string(limit), "--val-limit", std::to_string(val_limit),
                                "--stop-after-step", std::to_string(stop_after_step)};
  if (resume) a.push_back("--resume");
  if (augment) a.push_back("--augment");
  if (deterministic) a.push_back("--deterministic");
  if (timeline) a.push_back("--timeline");
  if (!bind.empty()) a.insert(a.end(), {"--bind", bind});
  if (!val_split.empty()) a.insert(a.end(), {"--val-split", val_split});
  const auto registry = datasets.as_arguments();
  a.insert(a.end(), registry.begin(), registry.end());
  return a;
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
  if (job.scripted_model() && lockstep::rank() == 0) keep_scripted_model(job);
  if (job.deterministic) train::use_deterministic_algorithms();
  const JobModel model = make_job_model(job, d);
  const torch::Device device = train::choose_device(job.device, lockstep::local_rank());
  // cuDNN times its algorithms for each shape and keeps the fastest, as PyTorch's ImageNet
  // recipe asks: a few percent for convolutional models, whose shapes repeat every step.
  if (device.is_cuda() && !job.deterministic) at::globalContext().setBenchmarkCuDNN(true);
  model.module->to(device);
  auto optimizer = make_optimizer(job, model.module->parameters());
  auto options = train::TrainerOptions()
                     .epochs(job.epochs)
                     .lr(job.lr)
                     .scale_lr_by_world_size(job.scale_lr)
                     .schedule(train::ScheduleOptions().kind(job.schedule).warmup_steps(job.warmup_steps))
                     .log_every(job.log_every)
                     .out_dir(job.out)
                     .checkpoint_every(job.checkpoint_every)
                     .keep_checkpoints(job.keep)
                     .resume(job.resume)
                     .stop_after_step(job.stop_after_step)
                     .handle_signals(true)
                     .model_name(job.model_label())
                     .autocast_bf16(job.precision == "bf16")
                     .timeline(job.timeline)
                     .ddp(DDPOptions().bucket_cap_mb(job.bucket_cap_mb).first_bucket_cap_mb(
                         std::min(DDPOptions().first_bucket_cap_mb(), job.bucket_cap_mb)));
  if (job.clip_grad_norm > 0) options.clip_grad_norm(job.clip_grad_norm);
  train::Trainer trainer(model.module, model.forward, optimizer, train::cross_entropy_loss(), options);
  if (lockstep::rank() == 0) trainer.add_sink(train::console_sink(std::cout, train::interactive_console()));

  const auto sampler = data::SamplerOptions().batch_size(static_cast<size_t>(job.batch_size)).seed(job.seed);
  const bool pin = device.is_cuda();  // so that batches reach the GPU without blocking
  data::PrefetchLoader train_loader(
      d.train_set,
      data::LoaderOptions().sampler(sampler).transform(d.train_transform).threads(job.threads).pin_memory(pin));
  data::PrefetchLoader val_loader(d.val_set, data::LoaderOptions()
                                                 .sampler(data::SamplerOptions(sampler).shuffle(false).even(false))
                                                 .transform(d.val_transform)
                                                 .threads(job.threads)
                                                 .pin_memory(pin));
  const auto result = trainer.fit(train_loader, &val_loader);
  if (lockstep::rank() == 0) {
    if (result.preempted) {
      std::cout << "preempted: stopped after step " << result.steps << " and saved its checkpoint; continue with: "
                << "lockstep train --out " << job.out << " --resume" << std::endl;
    } else if (result.stopped_early) {
      std::cout << "stopped after step " << result.steps << "; continue with: lockstep train --out " << job.out
                << " --resume" << std::endl;
    } else if (result.validation) {
      std::cout << job.model_label() << " on " << job.dataset << ": " << d.val_split << " top-1 "
                << percent(result.validation->value("top1")) << ", top-5 " << percent(result.validation->value("top5"))
                << " after " << job.epochs << " epochs on " << lockstep::world_size() << " workers in "
                << static_cast<int64_t>(result.seconds) << " s; run in " << job.out << std::endl;
    }
  }
  return result.preempted ? train::kPreemptedExitStatus : 0;
}

}  // namespace

int run_train_job(const TrainJob& job) {
  report_timing("started");
  lockstep::init();
  report_timing("joined");
  const std::string hosts = ranks_on_hosts();
  if (!hosts.empty() && lockstep::rank() == 0) std::cout << hosts << std::endl;
  if (job.workers_option != nullptr && job.workers_option->count() > 0 && job.workers != lockstep::world_size()) {
    throw ConfigError("-n " + std::to_string(job.workers) + " does not match this launch's world size " +
                      std::to_string(lockstep::world_size()) + "; leave -n out inside mpirun or torchrun");
  }
  if (job.mode_option != nullptr && job.mode_option->count() > 0 && job.mode == "threads" &&
      lockstep::world_size() > 1) {
    throw ConfigError("--mode threads runs the workers inside one process, but this process is one rank of a "
                      "launched job; leave --mode out inside mpirun or torchrun");
  }
  const JobData data = open_job_data(job);
  report_timing("data");
  const int status = train_worker(job, data);
  lockstep::shutdown();
  return status;
}

void TrainJob::check_before_launch() const { check_model_fits(*this, open_job_data(*this)); }

int run_train_replicas(const TrainJob& job) {
  const JobData data = open_job_data(job);
  check_model_fits(job, data);
  // The intra-op threads the launcher would give each worker process (OMP_NUM_THREADS, or
  // one each beside other workers), so that both modes compute the same bits.
  const bool threads_chosen = std::getenv("OMP_NUM_THREADS") != nullptr;
  const int threads = job.workers > 1 && !threads_chosen ? 1 : at::get_num_threads();
  const bool gpu_job = train::choose_device(job.device, 0).is_cuda();
  int status = 0;
  run_replicas(job.workers, [&](ProcessGroup group) {
    const int mine = train_worker(job, data);
    if (group.rank() == 0) status = mine;  // every replica stops at the same step
  }, ReplicaOptions().threads(threads).bind_cores(launch::binding_by_default(job.bind, gpu_job) != "none"));
  return status;
}

}  // namespace lockstep::tools
