#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "handed_flags.h"
#include "registry_choice.h"

namespace lockstep::tools {

// A run folder's copy of the TorchScript model it trains (the weights are in checkpoints/).
inline constexpr const char* kScriptedModelFile = "model.pt";

// The settings of one `lockstep train` run, as flags or settings-file keys (--config,
// RUN/config.toml), and the run itself.
struct TrainJob {
  std::string dataset = "fashion-mnist";
  std::string model = "cnn";  // a built-in name, or a TorchScript file (FILE.pt)
  int workers = 2;
  std::string mode = "threads";    // threads: replicas in this process; processes: one per worker
  std::string device = "auto";     // auto, cpu, cuda or cuda:N (lockstep::train::choose_device)
  std::string precision = "fp32";  // fp32, or bf16: autocast on the device
  int64_t epochs = 5;
  int64_t batch_size = 64;        // per worker
  int64_t global_batch_size = 0;  // over all workers, instead of batch_size; 0: none
  std::string optimizer = "sgd";
  double lr = 0.05;            // unless given: 0.05 for sgd, 1e-3 for adam and adamw
  double momentum = 0.9;       // sgd only
  double weight_decay = 5e-4;  // unless given: 5e-4 for sgd, 0 for adam, 0.01 for adamw
  std::string schedule = "cosine";
  int64_t warmup_steps = 100;
  double clip_grad_norm = 0;  // 0: off
  int zero = 0;               // ZeRO stage: 1 shards the optimizer state across the workers, 2 the gradients too
  bool timeline = false;      // RUN/timeline.json
  bool sample_log = false;    // RUN/samples.log
  std::string bind;           // core, none, or "": core when there are enough cores, else none
  double bucket_cap_mb = 25;  // DistributedDataParallel's bucket size
  bool gradient_as_bucket_view = true;  // grad() a view into its bucket: no copy out
  bool scale_lr = false;
  bool augment = false;        // random crops and flips of small images (large ones are always cropped)
  bool deterministic = false;  // deterministic kernels: bit-exact resumes on a GPU
  bool malloc_tuning = true;   // glibc keeps freed memory for the next step (job/malloc_tuning.h)
  std::string out;
  bool resume = false;
  uint64_t seed = 0;
  int threads = 1;  // loader threads per worker (more on GPUs: resolve_defaults)
  int64_t log_every = 50;
  int64_t checkpoint_every = 0;
  int keep = 3;
  size_t limit = 0;       // train on the first N examples only (0: all)
  size_t val_limit = 0;   // validate on the first N only
  std::string val_split;  // default: val, else test
  int64_t stop_after_step = 0;
  int max_restarts = 0;              // processes mode: restarts of every worker after one fails
  std::string recovery = "restart";  // processes mode: restart (every worker, from a checkpoint) or live
  int min_workers = 0;               // -n MIN:MAX's MIN: live recovery trains on while this many are left
  double heartbeat_timeout = 30;     // processes mode: seconds without heartbeats that make a worker hung
  RegistryChoice datasets;           // --data-toml, --data-path
  // Resuming a run folder that kept no settings (from before RUN/config.toml): they are
  // kept once this start has trained, so that a resume its checkpoint refuses leaves the
  // folder as it was.
  bool settings_kept_after_training = false;

  CLI::Option* workers_option = nullptr;
  CLI::Option* mode_option = nullptr;
  CLI::Option* lr_option = nullptr;
  CLI::Option* weight_decay_option = nullptr;
  CLI::Option* threads_option = nullptr;
  CLI::Option* recovery_option = nullptr;

  void add_options(CLI::App& command);
  // Fills the defaults that depend on other settings (the optimizer's learning rate).
  void resolve_defaults();
  // ConfigError naming the setting that cannot work.
  void check() const;
  // Opens the data and builds the model as a worker would, so that a missing file, a model
  // that does not fit the data or a bad registry is one line from the launching process.
  void check_before_launch() const;
  // Whether the workers train on GPUs; ConfigError naming --device when it cannot be had.
  bool on_gpu() const;
  // --model names a TorchScript file rather than a built-in model.
  bool scripted_model() const;
  // The model's name in run folders and checkpoints: the built-in name or the file's stem.
  std::string model_label() const;
  // runs/<dataset>-<model>-<stamp>
  std::string default_out(const std::string& stamp) const;
  /// Where metrics, logs and the timeline go: `out`, or for an s3:// `out` a local folder
  /// named after it (runs/s3-BUCKET-PREFIX).
  std::string run_folder() const;
  /// Where checkpoints go: `out`/checkpoints, local or in the bucket.
  std::string checkpoint_folder() const;
  /// The run folder's samples.log.
  std::string sample_log_path() const;
  /// A resumed run that has a sample log goes on writing it, with or without --sample-log,
  /// so that its audit trail has no hole. In the launching process, before workers start
  /// (on a cluster each node's launcher sees its own disk; rank 0's setting rules).
  void continue_sample_log();
  // The newest runs/<dataset>-<model>-* folder, for --resume without --out.
  std::string newest_run() const;
  // Every setting as explicit flags, for the workers this process starts.
  std::vector<std::string> as_arguments() const;
  // Every setting by its settings-file key (the launcher's too), for RUN/config.toml.
  std::vector<NamedSetting> settings() const;

 private:
  HandedFlags<TrainJob> flags_;  // every flag above, declared once in add_options

  // A known name, or a readable file.
  void check_model() const;
  // --out does not hold another run's checkpoints unless resuming.
  void check_out() const;
};

// One process's part of a launched job: joins it, reads its share, trains, logs, checkpoints.
int run_train_job(const TrainJob& job);

// The whole job in this process: its workers as replicas on threads, sharing the datasets.
int run_train_replicas(const TrainJob& job);

// `body` on `workers` replicas on threads of this process, each with the intra-op threads a
// worker process would have; the first failure as "worker N: what it threw".
void on_replica_threads(const TrainJob& job, int workers, const std::function<void()>& body);

}  // namespace lockstep::tools
