// ShardedOptimizer's scenarios, run on every rank as real processes (ddp_worker) and as
// replicas on threads (sharded_optimizer_test): each trains one model with
// DistributedDataParallel and the unsharded optimizer and a second, the same, with the
// ShardedOptimizer, side by side on rank-dependent batches, and requires every parameter
// to have the same bits after every step.
#include "sharded_scenarios.h"

#include <algorithm>
#include <iostream>
#include <numeric>
#include <sstream>

#include <torch/torch.h>

#include "optim/optimizer_kinds.h"
#include "optim/optimizer_state_table.h"
#include "lockstep/lockstep.h"

namespace {

using torch::Tensor;

constexpr int kSteps = 20;
thread_local int failures = 0;  // per replica

void fail(const std::string& what) {
  ++failures;
  std::cerr << "rank " << lockstep::rank() << ": " << what << "\n";
}

// Parameters of several sizes, so that the partition has something to balance.
torch::nn::Sequential make_model(int out_features = 32) {
  torch::nn::Sequential model{nullptr};
  lockstep::with_replica_generator([&] {
    torch::manual_seed(100 + lockstep::rank());  // DDP starts everyone from rank 0's
    model = torch::nn::Sequential(torch::nn::Linear(8, out_features), torch::nn::ReLU(),
                                  torch::nn::Linear(out_features, 16), torch::nn::Tanh(), torch::nn::Linear(16, 4));
  });
  return model;
}

// This rank's batch of micro-batch `micro`: different on every rank.
Tensor loss_of(torch::nn::Sequential& model, int micro) {
  Tensor x, y;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(1000 + 10 * micro + lockstep::rank());
    x = torch::randn({6, 8});
    y = torch::randn({6, 4});
  });
  return torch::mse_loss(model->forward(x), y);
}

// How the optimizers are stepped: plainly, with no_sync() accumulation of every other
// micro-batch, or with the gradients clipped to a global norm first.
enum class Variant { plain, no_sync, clip };
const char* name_of(Variant v) { return v == Variant::plain ? "plain" : v == Variant::no_sync ? "no_sync" : "clip"; }

struct Trained {
  torch::nn::Sequential model{nullptr};
  std::unique_ptr<lockstep::DistributedDataParallel> ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  lockstep::OptimizerSharding* gradient_sharding = nullptr;  // ZeRO-2
  // After the last reducing backward: the bytes of the gradients this rank holds, of DDP's
  // buckets, and of its largest bucket.
  int64_t gradient_bytes = 0, bucket_bytes = 0, largest_bucket_bytes = 0;

  // One micro-batch; true when the optimizer stepped.
  bool train(int micro, int step, Variant variant) {
    const bool accumulate = variant == Variant::no_sync && micro % 2 == 0;
    if (accumulate) {
      auto guard = ddp->no_sync();
      loss_of(model, micro).backward();
      return false;
    }
    loss_of(model, micro).backward();
    gradient_bytes = 0;
    for (const auto& p : model->parameters()) gradient_bytes += p.grad().defined() ? p.grad().nbytes() : 0;
    bucket_bytes = ddp->bucket_bytes();
    const auto params = model->parameters();
    for (const auto& members : ddp->buckets()) {
      int64_t bytes = 0;
      for (size_t i : members) bytes += params[i].nbytes();
      largest_bucket_bytes = std::max(largest_bucket_bytes, bytes);
    }
    if (variant == Variant::clip && gradient_sharding != nullptr) {
      gradient_sharding->clip_grad_norm(0.05);
    } else if (variant == Variant::clip) {
      torch::nn::utils::clip_grad_norm_(model->parameters(), 0.05);
    }
    for (auto& group : optimizer->param_groups()) group.options().set_lr(0.01 * (1 + step % 3));  // a schedule
    optimizer->step();
    optimizer->zero_grad();
    return true;
  }
};

// `stage` 0: DDP and Opt; 1: its state sharded; 2: its gradients too.
template <typename Opt, typename Options>
Trained make_trained(int stage, const Options& options) {
  Trained t;
  t.model = make_model();
  // Buckets of a few parameters each: with sharded gradients they take turns in two buffers.
  // In the order gradients come in (the last bias first), DDP's buckets of 600 bytes are
  // {the last bias}, {the last weight, the middle bias, the middle weight}, {the first bias
  // and weight}, and ZeRO-2's half as large split the second one where they can.
  t.ddp = std::make_unique<lockstep::DistributedDataParallel>(
      t.model.ptr(), lockstep::DDPOptions().first_bucket_cap_mb(1e-5).bucket_cap_mb(600 / 1048576.0));
  const auto params = t.model->parameters();
  if (stage > 0) {
    auto sharded = std::make_unique<lockstep::ShardedOptimizer<Opt>>(params, options);
    if (stage == 2) {
      t.ddp->shard_gradients(*sharded);
      t.gradient_sharding = sharded.get();
    }
    t.optimizer = std::move(sharded);
  } else {
    t.optimizer = std::make_unique<Opt>(params, options);
  }
  return t;
}

// One parameter's state: its numbers ("step=20") and field names, and its tensors.
struct StateFields {
  std::vector<std::string> labels;
  std::vector<Tensor> tensors;
};

template <typename Kind>
StateFields fields_of(torch::optim::OptimizerParamState& state) {
  StateFields f;
  Kind::each_state_field(static_cast<typename Kind::State&>(state), [&](const char* name, auto& field) {
    std::ostringstream label;
    label << name;
    if constexpr (lockstep::detail::is_tensor<decltype(field)>) {
      if (!field.defined()) label << " undefined";
      if (field.defined()) f.tensors.push_back(field);
    } else {
      label << "=" << field;
    }
    f.labels.push_back(label.str());
  });
  return f;
}

// Every parameter's state the same, bit for bit, in both optimizers.
template <typename Kind>
void expect_same_state(torch::optim::Optimizer& got, torch::optim::Optimizer& want,
                       const std::vector<Tensor>& got_params, const std::vector<Tensor>& want_params,
                       const std::string& what) {
  using StateMap = std::decay_t<decltype(got.state())>;
  for (size_t i = 0; i < got_params.size(); ++i) {
    const std::string param = what + ": parameter " + std::to_string(i);
    auto found = got.state().find(lockstep::detail::state_key<StateMap>(got_params[i]));
    auto wanted = want.state().find(lockstep::detail::state_key<StateMap>(want_params[i]));
    if (found == got.state().end() || wanted == want.state().end()) {
      fail(param + " has no state");
      continue;
    }
    const StateFields mine = fields_of<Kind>(*found->second), theirs = fields_of<Kind>(*wanted->second);
    if (mine.labels != theirs.labels) fail(param + "'s state fields differ");
    for (size_t k = 0; k < mine.tensors.size() && k < theirs.tensors.size(); ++k) {
      if (!torch::equal(mine.tensors[k], theirs.tensors[k]))
        fail(param + "'s state tensor " + std::to_string(k) + " differs");
    }
  }
}

// ZeRO-1 (`stage` 1) or ZeRO-2 (2) against DDP with the unsharded optimizer.
template <typename Kind, typename Options>
void equivalence_of(const Options& options, Variant variant, int stage = 1) {
  using Opt = typename Kind::Optimizer;
  const std::string what = "ZeRO-" + std::to_string(stage) + " " + Kind::name + "/" + name_of(variant);
  Trained plain = make_trained<Opt>(0, options);
  Trained sharded = make_trained<Opt>(stage, options);
  if (stage == 2 && variant == Variant::clip) {
    // Buckets in registration order, the reverse of the order gradients come in: a bucket
    // fills before the one before it in its turn was launched, and moves in at its launch.
    std::vector<int64_t> order(sharded.model->parameters().size());
    std::iota(order.begin(), order.end(), 0);
    plain.ddp->load_bucket_order(order);
    sharded.ddp->load_bucket_order(order);
  }
  auto& sharding = dynamic_cast<lockstep::OptimizerSharding&>(*sharded.optimizer);
  const auto plain_params = plain.model->parameters();
  const auto sharded_params = sharded.model->parameters();

  size_t owned = 0;
  int64_t owned_bytes = 0;
  for (size_t i = 0; i < sharded_params.size(); ++i) {
    if (sharding.owners()[i] != lockstep::rank()) continue;
    ++owned;
    owned_bytes += sharded_params[i].nbytes();
  }
  for (int micro = 0, step = 0; step < kSteps; ++micro) {
    const bool stepped = plain.train(micro, step, variant);
    sharded.train(micro, step, variant);
    if (!stepped) continue;
    ++step;
    for (size_t i = 0; i < plain_params.size(); ++i) {
      if (!torch::equal(plain_params[i], sharded_params[i])) {
        fail(what + " step " + std::to_string(step) + ": parameter " + std::to_string(i) +
             " differs from the unsharded "
             "optimizer's by " +
             std::to_string((plain_params[i] - sharded_params[i]).abs().max().item<double>()));
        return;
      }
    }
    if (sharded.optimizer->state().size() != owned) {
      fail(what + ": holds state for " + std::to_string(sharded.optimizer->state().size()) + " parameters, owns " +
           std::to_string(owned));
    }
    // ZeRO-2: after its buckets were reduced, a rank holds the gradients it steps, and DDP
    // the two buffers its buckets take turns in.
    if (stage == 2 &&
        (sharded.gradient_bytes != owned_bytes || sharded.bucket_bytes > 2 * sharded.largest_bucket_bytes)) {
      fail(what + " step " + std::to_string(step) + ": holds " + std::to_string(sharded.gradient_bytes) +
           " bytes of gradients and " + std::to_string(sharded.bucket_bytes) + " of buckets, steps " +
           std::to_string(owned_bytes) + " bytes of parameters");
    }
  }

  // Consolidated on rank 0, the state is the unsharded optimizer's; rank 0 alone may save it.
  sharding.consolidate_state_dict(0);
  if (lockstep::rank() == 0) {
    expect_same_state<Kind>(*sharded.optimizer, *plain.optimizer, sharded_params, plain_params, what + " consolidated");
    torch::serialize::OutputArchive archive;
    sharded.optimizer->save(archive);
  } else {
    try {
      torch::serialize::OutputArchive archive;
      sharded.optimizer->save(archive);
      fail(what + ": save() without the whole state did not throw");
    } catch (const lockstep::ConfigError& e) {
      if (std::string(e.what()).find("call consolidate_state_dict(") == std::string::npos) fail(e.what());
    }
  }
  // The next step lets the others' state go again.
  plain.train(2 * kSteps + 1, 0, Variant::plain);
  sharded.train(2 * kSteps + 1, 0, Variant::plain);
  if (sharded.optimizer->state().size() != owned) fail(what + ": kept others' state after the step");
  for (size_t i = 0; i < plain_params.size(); ++i) {
    if (!torch::equal(plain_params[i], sharded_params[i]))
      fail(what + ": parameter " + std::to_string(i) + " differs after consolidating");
  }
}

void sharded_equivalence() {
  namespace optim = torch::optim;
  using namespace lockstep::detail;
  for (const Variant v : {Variant::plain, Variant::no_sync, Variant::clip}) {
    equivalence_of<SgdKind>(optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-3), v);
    equivalence_of<AdamKind>(optim::AdamOptions(0.01).weight_decay(1e-3), v);
    equivalence_of<AdamWKind>(optim::AdamWOptions(0.01), v);
  }
  equivalence_of<RmspropKind>(optim::RMSpropOptions(0.01).momentum(0.5).centered(true), Variant::plain);
  equivalence_of<AdagradKind>(optim::AdagradOptions(0.01), Variant::plain);
}

// ZeRO-2: the gradients sharded too, clipped across the ranks.
void gradient_sharding_equivalence() {
  namespace optim = torch::optim;
  using namespace lockstep::detail;
  for (const Variant v : {Variant::plain, Variant::no_sync, Variant::clip}) {
    equivalence_of<SgdKind>(optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-3), v, 2);
    equivalence_of<AdamKind>(optim::AdamOptions(0.01).weight_decay(1e-3), v, 2);
    equivalence_of<AdamWKind>(optim::AdamWOptions(0.01), v, 2);
  }
}

// Rank 1's first layer is wider: every rank names that parameter.
void sharded_different_parameters() {
  auto model = make_model(lockstep::rank() == 1 ? 33 : 32);
  try {
    lockstep::ShardedOptimizer<torch::optim::Adam> optimizer(model->parameters());
    fail("parameters that differ between ranks were accepted");
  } catch (const lockstep::MismatchError& e) {
    std::cout << "rank " << lockstep::rank() << ": MismatchError: " << e.what() << std::endl;
  }
}

void sharded_lbfgs() {
  auto model = make_model();
  try {
    lockstep::ShardedOptimizer<torch::optim::LBFGS> optimizer(model->parameters());
    fail("LBFGS was sharded");
  } catch (const lockstep::ConfigError& e) {
    std::cout << "rank " << lockstep::rank() << ": ConfigError: " << e.what() << std::endl;
  }
}

// Live recovery (LOCKSTEP_RECOVERY=live, as the test starts these workers): each partition
// is kept by its rank and the one before. Four ranks train alike on batches every rank shares
// (so no gradient needs reducing). At step 4 rank 0 applies the step and ranks 1 and 2 are
// lost at once: they were the two that kept partition 2, so ranks 0 and 3 cannot reshard,
// and say why, with nothing changed. Had only rank 1 been lost: ranks 2 and 3, holding the
// step's gradients, catch up with rank 0, and the three reshard over a group of their own.
// Every parameter and state tensor stays that of the unsharded Adam, bit for bit, through
// 3 more steps.
void sharded_lost_rank() {
  using lockstep::detail::AdamKind;
  const auto options = torch::optim::AdamOptions(0.01).weight_decay(1e-3);
  torch::nn::Sequential plain_model = make_model(), sharded_model = make_model();
  lockstep::synchronize(*plain_model);  // every rank starts from rank 0's
  lockstep::synchronize(*sharded_model);
  const auto plain_params = plain_model->parameters(), sharded_params = sharded_model->parameters();
  torch::optim::Adam plain(plain_params, options);
  lockstep::ShardedOptimizer<torch::optim::Adam> sharded(sharded_params, options);
  if (!sharded.mirrored()) fail("not mirrored under LOCKSTEP_RECOVERY=live");
  auto shared_loss = [](torch::nn::Sequential& model, int step) {
    torch::manual_seed(5000 + step);  // the same batch on every rank
    return torch::mse_loss(model->forward(torch::randn({6, 8})), torch::randn({6, 4}));
  };
  auto backward_both = [&](int step) {
    plain.zero_grad();
    sharded.zero_grad();
    shared_loss(plain_model, step).backward();
    shared_loss(sharded_model, step).backward();
  };
  auto expect_alike = [&](const std::string& when) {
    for (size_t i = 0; i < plain_params.size(); ++i) {
      if (!torch::equal(plain_params[i], sharded_params[i]))
        fail(when + ": parameter " + std::to_string(i) + " differs");
    }
  };
  for (int step = 1; step <= 3; ++step) {
    backward_both(step);
    plain.step();
    sharded.step();
  }
  backward_both(4);
  plain.step();
  if (lockstep::rank() == 0) sharded.step_kept_partitions();  // applied before the loss

  const lockstep::ProcessGroup outer = lockstep::new_group({0, 3});
  if (outer.is_member()) {
    try {
      sharded.reshard(outer, /*holds=*/true);
      fail("resharded without anyone keeping partition 2");
    } catch (const lockstep::Error& e) {
      std::cout << "rank " << lockstep::rank() << ": Error: " << e.what() << std::endl;
    }
  }

  const lockstep::ProcessGroup survivors = lockstep::new_group({0, 2, 3});
  if (lockstep::rank() == 1) return;
  if (lockstep::rank() != 0) sharded.step_kept_partitions();  // held the gradients: catch up
  sharded.reshard(survivors, /*holds=*/true);
  expect_alike("after the reshard");
  size_t kept = 0;
  for (size_t i = 0; i < sharded_params.size(); ++i) kept += sharded.keeps(i) ? 1 : 0;
  if (sharded.state().size() != kept) fail("holds state beyond its partitions after the reshard");
  for (int step = 5; step <= 7; ++step) {
    backward_both(step);
    plain.step();
    sharded.step();
    expect_alike("step " + std::to_string(step) + " on 3 ranks");
  }
  sharded.consolidate_state_dict(0);
  if (survivors.rank() == 0) {
    expect_same_state<AdamKind>(sharded, plain, sharded_params, plain_params, "consolidated over 3 ranks");
  }
}

}  // namespace

int run_sharded_scenario(const std::string& scenario) {
  failures = 0;
  if (scenario == "sharded-equivalence") {
    sharded_equivalence();
  } else if (scenario == "sharded-gradients-equivalence") {
    gradient_sharding_equivalence();
  } else if (scenario == "sharded-different-parameters") {
    sharded_different_parameters();
  } else if (scenario == "sharded-lost-rank") {
    sharded_lost_rank();
  } else if (scenario == "sharded-lbfgs") {
    sharded_lbfgs();
  } else {
    std::cerr << "unknown sharded scenario '" << scenario << "'\n";
    return 2;
  }
  if (failures == 0) std::cout << "rank " << lockstep::rank() << ": " << scenario << " ok" << std::endl;
  return failures == 0 ? 0 : 1;
}
