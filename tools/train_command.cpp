#include "train_command.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include "job/malloc_tuning.h"
#include "job/slurm_step.h"
#include "launch/cluster_node.h"
#include "launch/launcher.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/train/device.h"
#include "workers_mode.h"
#include "job_data.h"
#include "run_config.h"
#include "temporary_folder.h"
#include "train_job.h"

namespace lockstep::tools {
namespace {

namespace fs = std::filesystem;

std::string timestamp() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::localtime(&now));
  return text;
}

// Which attempt of a job the launcher restarted this worker in (0: the first).
int restart_count() {
  const char* count = std::getenv("LOCKSTEP_RESTART_COUNT");
  return count != nullptr ? std::atoi(count) : 0;
}

// Starts `job.workers` copies of this command on this node (on every node of a cluster job:
// an srun step, a PyTorchJob), as one job, each with the resolved settings; node 0's
// launcher keeps the run's settings (every node's may see the same run folder).
int launch_workers(TrainJob job) {
  const TrainJob settings = job;  // as given, before the cluster's nodes are counted in
  launch::LaunchOptions options;
  options.nproc_per_node = job.workers;
  const std::string note =
      launch::take_node_from_cluster(options, job.workers_option->count() > 0, process_environment());
  if (!note.empty()) std::cerr << "lockstep train: " << note << "\n";
  job.workers = options.nproc_per_node * options.nnodes;  // what each worker checks its world against
  // A PyTorchJob's elastic range (PET_NNODES=MIN:MAX) trains on with the nodes left: live
  // recovery, as -n MIN:MAX, unless refused.
  if (options.min_nnodes > 0 && job.recovery_option->count() == 0) job.recovery = "live";
  const std::vector<std::string> arguments = job.as_arguments();
  options.max_restarts = job.max_restarts;
  options.recovery = job.recovery;
  options.min_nproc = job.min_workers;
  options.bind = launch::binding_by_default(job.bind, job.on_gpu());
  options.heartbeat_timeout = std::chrono::milliseconds(static_cast<long long>(job.heartbeat_timeout * 1000));
  // Stopped workers finish their step and save a checkpoint before they exit (preemption).
  options.stop_timeout = std::chrono::seconds(30);
  options.command = {fs::canonical("/proc/self/exe").string(), "train"};
  options.command.insert(options.command.end(), arguments.begin(), arguments.end());
  const auto run = [&] { return launch::run_workers(options); };
  return options.node_rank == 0 ? train_keeping_run_config(settings, run) : run();
}

}  // namespace

void add_train_command(CLI::App& app, Action& chosen) {
  CLI::App* command = app.add_subcommand(
      "train", "Train a model data-parallel on a registry dataset (default: a CNN on Fashion-MNIST, 2 workers)");
  auto job = std::make_shared<TrainJob>();
  auto config = std::make_shared<std::string>();
  job->add_options(*command);
  command
      ->add_option("--config", *config,
                   "TOML file of settings (the long flags, _ for -; a run's RUN/config.toml); flags win")
      ->group("Output");
  command->callback([=, &chosen] {
    if (!config->empty()) apply_settings_file(*config, *command);
    chosen = [=] {
      if (job->malloc_tuning) tune_malloc_here();
      const auto env = process_environment();
      const auto step = slurm_step(env);
      // Under srun (-n on a step of one task per node) or in a PyTorchJob pod this process may
      // be its node's launcher (srun --ntasks-per-node=1 lockstep train -n 4) rather than a rank.
      const bool node_launcher = launch::launches_a_cluster_node(env, job->workers_option->count() > 0);
      const bool worker = launched() && !node_launcher;
      if (node_launcher && job->mode_option->count() > 0 && job->mode == "threads") {
        throw ConfigError(
            "--mode threads runs the workers inside one process, but this is one node of a cluster job "
            "(srun or a PyTorchJob pod), whose workers are processes; leave out --mode");
      }
      // A restarted attempt, or a requeued Slurm job, goes on from the newest checkpoint of the run it restarts.
      if ((worker && restart_count() > 0) || (step && step->restart_count > 0)) job->resume = true;
      // Every task of a Slurm job, on every node and after a requeue, writes to the same run folder.
      if (step && job->out.empty()) job->out = job->default_out("job" + step->job_id);
      if (job->resume) {
        // The run goes on with the settings it kept; flags may change only how it runs.
        if (job->out.empty() && !worker) job->out = job->newest_run();
        const std::string note = job->out.empty() ? "" : take_run_config(*job, *command, worker);
        if (!note.empty() && !worker) std::cerr << note << "\n";
      }
      job->resolve_defaults();
      // -n MIN:MAX trains on with fewer workers than it started: live recovery, unless refused.
      if (job->min_workers > 0 && job->recovery_option->count() == 0) job->recovery = "live";
      const std::string mode_given = job->mode_option->count() > 0              ? job->mode
                                     : node_launcher || job->recovery == "live" ? "processes"
                                                                                : "";
      const auto mode =
          choose_workers_mode(mode_given, job->device, job->workers, train::visible_gpus(), job->max_restarts);
      job->mode = mode.mode;
      if (!mode.note.empty() && !worker) std::cerr << mode.note << "\n";
      job->check();
      if (worker) return run_train_job(*job);
      // Resolve what the workers must agree on (the run folder's name) before starting them.
      if (job->out.empty()) job->out = job->default_out(timestamp());
      job->continue_sample_log();
      if (job->mode == "threads") return run_train_replicas(*job);
      // The indexes this check reads are left here for the workers: one read of each per job.
      const TemporaryFolder index_copies("lockstep-index-copies");
      setenv(kIndexCopiesVariable, index_copies.path().c_str(), 1);
      job->check_before_launch();
      // The launcher's settings are the run's; the workers do not save theirs.
      setenv(kRunConfigSavedVariable, "1", 1);
      return launch_workers(*job);
    };
  });
}

}  // namespace lockstep::tools
