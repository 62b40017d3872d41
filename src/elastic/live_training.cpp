#include "lockstep/ddp/live_training.h"

#include <chrono>
#include <iostream>

#include <ATen/ATen.h>

#include "comm/groups/regroup.h"
#include "elastic/furthest_member.h"
#include "elastic/membership.h"
#include "job/seconds_since.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/comm/init.h"
#include "lockstep/ddp/synchronize.h"
#include "lockstep/error.h"
#include "lockstep/optim/sharded_optimizer.h"
#include "test_hooks/test_hooks.h"
#include "timeline/membership_mark.h"

namespace lockstep {
namespace {

// What ended a generation, for rank 0's line on the next: the error's first line.
std::string cause(const std::exception& error) {
  std::string text = error.what();
  text = text.substr(0, text.find('\n'));
  const std::string ours = "lockstep: ";
  return text.rfind(ours, 0) == 0 ? text.substr(ours.size()) : text;
}

}  // namespace

LiveTraining::LiveTraining(std::shared_ptr<torch::nn::Module> module, torch::optim::Optimizer& optimizer, int64_t steps,
                           DDPOptions options)
    : module_(std::move(module)),
      optimizer_(optimizer),
      steps_(steps),
      options_(std::move(options.group(ProcessGroup()))),  // the default group, whichever is current
      membership_(elastic::Membership::from_environment()) {
  if (live() && dynamic_cast<OptimizerSharding*>(&optimizer_) != nullptr) {
    throw ConfigError(
        "lockstep::LiveTraining: a ShardedOptimizer keeps the group it was made in, and a replacement has "
        "none yet; under live recovery give LiveTraining an unsharded optimizer (lockstep train --zero 1 "
        "--recovery live heals sharded state)");
  }
  if (live() && membership_->joiner()) {
    // Started again by its launcher, or on a node that came later, while the others train on:
    // it joins them at a step's end.
    if (!membership_->wait_for_admission()) {
      done_ = true;
      return;
    }
    detail::regroup(membership_->me().id, membership_->rank(), static_cast<int>(membership_->members().size()),
                    membership_->generation());
    holds_state_ = false;
    why_ = "a replacement was admitted";
    go_on();
    return;
  }
  if (!is_initialized()) init();
  ddp_.emplace(module_, options_);
}

LiveTraining::~LiveTraining() = default;

bool LiveTraining::train_step(const std::function<void(const LiveStep&)>& forward_backward) {
  if (!more()) throw Error("lockstep::LiveTraining::train_step: all " + std::to_string(steps_) + " steps are trained");
  bool joiner_waiting = false;
  try {
    forward_backward(LiveStep{step_, lockstep::rank(), lockstep::world_size()});
    if (live()) {
      // The commit: every member finished its backward, or this call fails with the group.
      at::Tensor agreed = at::tensor({membership_->joiner_waiting() ? 1 : 0}, at::kInt);
      all_reduce(agreed, ReduceOp::Max);
      joiner_waiting = agreed.item<int>() != 0;
    }
  } catch (const std::exception& error) {
    if (!live() || !detail::default_group_failed()) throw;
    why_ = cause(error);
    regroup();
    go_on();
    return false;
  }
  optimizer_.step();
  ++step_;
  if (!live()) return true;
  if (!more()) {
    if (lockstep::rank() == 0) membership_->finish();  // a replacement still waiting ends too
  } else if (joiner_waiting) {
    why_ = "a joiner was admitted";
    regroup();
    go_on();
  }
  return true;
}

void LiveTraining::regroup() {
  const auto start = std::chrono::steady_clock::now();
  ddp_.reset();
  membership_->form_next();
  detail::regroup(membership_->me().id, membership_->rank(), static_cast<int>(membership_->members().size()),
                  membership_->generation());
  regroup_seconds_ = seconds_since(start);
}

// Heals the new generation and makes its DDP; when a member is lost meanwhile, regroups
// again, as often as members are lost, while enough are left.
void LiveTraining::go_on() {
  for (;;) {
    if (lockstep::world_size() < membership_->min_members()) {
      if (lockstep::rank() == 0) membership_->finish();
      throw Error("lockstep: " + std::to_string(lockstep::world_size()) + " of the workers are left, fewer than " +
                  std::to_string(membership_->min_members()) + " (" + membership_->missing() +
                  " missing), after step " + std::to_string(step_));
    }
    try {
      const auto start = std::chrono::steady_clock::now();
      heal();
      ddp_.emplace(module_, options_);
      timeline::detail::mark_membership(membership_->generation(), lockstep::world_size(), why_, regroup_seconds_,
                                        seconds_since(start));
      if (lockstep::rank() == 0) {
        std::cerr << "lockstep: generation " << membership_->generation() << " of " << lockstep::world_size()
                  << " workers goes on after step " << step_ << " (" << why_
                  << (membership_->missing().empty() ? "" : "; " + membership_->missing() + " missing") << ")"
                  << std::endl;
      }
      return;
    } catch (const std::exception& error) {
      if (!detail::default_group_failed()) throw;
      why_ = cause(error);
      regroup();
    }
  }
}

// Every member's state becomes that of the member furthest on (elastic/furthest_member.h).
void LiveTraining::heal() {
  test_hooks::die_if_asked_when_healing(membership_->me().id, membership_->generation());
  const auto source = elastic::find_furthest_member(holds_state_ ? step_ : -1, membership_->generation());
  if (step_ != source.step) holds_state_ = false;  // partly overwritten until both copies are done
  synchronize(*module_, source.rank);
  synchronize(optimizer_, source.rank);
  step_ = source.step;
  holds_state_ = true;
}

}  // namespace lockstep
