// Live recovery's worker: the training goes on in the members that are left, or with the
// joiners admitted, without a restart and without a checkpoint.
#include <sysexits.h>

#include <chrono>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>

#include "comm/groups/regroup.h"
#include "elastic/furthest_member.h"
#include "elastic/membership.h"
#include "elastic/sharded_heal.h"
#include "job/seconds_since.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/comm/init.h"
#include "lockstep/ddp/synchronize.h"
#include "lockstep/error.h"
#include "lockstep/optim/sharded_optimizer.h"
#include "test_hooks/test_hooks.h"
#include "timeline/membership_mark.h"
#include "worker_training.h"

namespace lockstep::tools {
namespace {

using Clock = std::chrono::steady_clock;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string describe(const std::vector<elastic::Member>& members) {
  std::string text;
  for (const auto& m : members) text += (text.empty() ? "" : ", ") + std::to_string(m.id);
  return (members.size() == 1 ? "worker " : "workers ") + text;
}

// Every member's state becomes that of the member furthest on (elastic/furthest_member.h);
// with a sharded optimizer, each partition's that of the members that keep it
// (elastic/sharded_heal.h). Returns the position all now hold. `mine` is this member's
// position, or nullopt where it holds no state (a replacement, or a heal cut short).
train::TrainingPosition heal(WorkerModel& worker, std::optional<train::TrainingPosition>& mine,
                             elastic::KeptPartitions& kept, const elastic::Membership& membership) {
  test_hooks::die_if_asked_when_healing(membership.me().id, membership.generation());
  const elastic::FurthestMember source = elastic::find_furthest_member(mine ? mine->step : -1, membership.generation());
  auto* sharding = dynamic_cast<OptimizerSharding*>(worker.optimizer.get());
  if (sharding != nullptr && elastic::catch_up(*sharding, source.step, kept) && mine) {
    ++mine->step;  // the step it failed to commit, as those that committed it stand
    ++mine->batch;
  }
  at::Tensor where = at::zeros({5}, at::kLong);
  if (lockstep::rank() == source.rank) {
    where = at::tensor({mine->epoch, mine->batch, mine->step, mine->global_batch_size, mine->dataset_size});
  }
  broadcast(where, source.rank);
  if (mine && mine->step != source.step) mine.reset();  // partly overwritten until both copies are done
  if (sharding != nullptr) {
    elastic::heal_sharded(*sharding, *worker.model.module, source, kept);
  } else {
    synchronize(*worker.model.module, source.rank);
    synchronize(*worker.optimizer, source.rank);
  }
  const auto w = where.accessor<int64_t, 1>();
  mine = train::TrainingPosition{w[0], w[1], w[2], lockstep::world_size(), w[3], w[4]};
  return *mine;
}

// At the end: whatever the members went through, they hold the same parameters (one
// broadcast of the model, once a job), or the job says it failed.
void check_members_alike(WorkerModel& worker) {
  std::vector<at::Tensor> flat;
  for (const auto& parameter : worker.model.module->parameters()) flat.push_back(parameter.detach().reshape(-1));
  const at::Tensor mine = at::cat(flat);
  at::Tensor root = mine.clone();
  broadcast(root, 0);
  at::Tensor alike = at::tensor({at::equal(mine, root) ? 1 : 0}, at::kInt);
  all_reduce(alike, ReduceOp::Min);
  if (alike.item<int>() == 0) {
    throw Error("lockstep: after live recovery the members' parameters differ from rank 0's; the run is not sound");
  }
  if (lockstep::rank() == 0) {
    std::cout << "lockstep: the parameters are identical on all " << lockstep::world_size() << " members" << std::endl;
  }
}

// Fewer members are left than -n MIN:MAX asks for: they save their state, as a preempted
// job does, and end with EX_TEMPFAIL (75), which the launcher passes on.
int stop_below_min(const TrainJob& job, const JobData& d, WorkerModel& worker, elastic::Membership& membership,
                   const train::TrainingPosition& at) {
  GroupTraining(job, d, worker, at, nullptr).save_checkpoint(at);
  if (lockstep::rank() == 0) {
    membership.finish();  // a replacement still waiting ends too
    std::cout << "lockstep: " << lockstep::world_size() << " of the workers are left, fewer than "
              << membership.min_members() << " (" << membership.missing() << " missing): saved the checkpoint of step "
              << at.step << "; continue with: lockstep train --out " << job.out << " --resume" << std::endl;
  }
  return EX_TEMPFAIL;
}

}  // namespace

int train_live(const TrainJob& job, const JobData& d, elastic::Membership& membership) {
  WorkerModel worker = make_worker_model(job, d);
  std::optional<train::TrainingPosition> reached;  // this member's state, when it holds one
  elastic::KeptPartitions kept;                    // with a sharded optimizer, its partitions'
  bool regrouped = membership.joiner();            // a replacement is healed before it trains
  std::string why;
  double regroup_seconds = 0;
  for (;;) {
    train::FitResult result;
    bool lost = false;
    try {
      std::optional<train::TrainingPosition> start;
      if (regrouped) {
        const auto healing = Clock::now();
        start = heal(worker, reached, kept, membership);
        timeline::detail::mark_membership(membership.generation(), lockstep::world_size(), why, regroup_seconds,
                                          seconds_since(healing));
        if (lockstep::rank() == 0) {
          std::cout << "lockstep: generation " << membership.generation() << " of " << lockstep::world_size()
                    << " workers goes on after step " << start->step << " (" << why << "; healed in "
                    << seconds_since(healing) << " s)" << std::endl;
        }
        if (lockstep::world_size() < membership.min_members())
          return stop_below_min(job, d, worker, membership, *start);
      }
      GroupTraining training(job, d, worker, start, [&membership] { return membership.joiner_waiting(); });
      if (!regrouped) print_start(job, d, worker, training);
      try {
        result = training.fit();
      } catch (...) {
        if (training.position()) reached = training.position();
        kept = {reached ? reached->step : -1, training.update_pending()};
        throw;
      }
      reached = training.position();
      kept = {reached ? reached->step : -1, false};
    } catch (const std::exception& e) {
      if (!detail::default_group_failed()) throw;
      lost = true;
      why = first_line(e.what());
    }
    if (!lost && !result.regroup) {
      check_members_alike(worker);
      if (lockstep::rank() == 0) membership.finish();
      return report_fit(job, d, result);
    }
    const auto forming = Clock::now();
    membership.form_next();
    detail::regroup(membership.me().id, membership.rank(), static_cast<int>(membership.members().size()),
                    membership.generation());
    std::ostringstream change;
    if (!membership.left().empty()) {
      change << describe(membership.left()) << " left: " << (lost ? why : "ended");
    } else if (lost) {
      change << "every member went on after " << why;
    }
    if (!lost && result.regroup) change << (change.tellp() > 0 ? "; " : "") << "a joiner was admitted";
    regroup_seconds = seconds_since(forming);
    change << "; regrouped in " << regroup_seconds << " s";
    why = change.str();
    regrouped = true;
  }
}

}  // namespace lockstep::tools
