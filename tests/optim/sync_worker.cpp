// A worker the synchronize(optimizer) and DistributedOptimizer tests start as real
// processes. Its first argument picks a scenario; it prints what went wrong and exits
// non-zero when anything does.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "support/rank_bytes.h"

using namespace lockstep::testing;

namespace {

namespace optim = torch::optim;

// ---- synchronize(optimizer) ----

// The state of one parameter, as bytes, for each optimizer kind (written apart from the
// library's own list of fields, so that a field it forgets shows here).
template <typename... Values>
void add_all(std::string& b, const Values&... values) {
  (add(b, values), ...);
}

void add_state(std::string& b, const optim::SGDParamState& s) { add_all(b, s.momentum_buffer()); }
void add_state(std::string& b, const optim::AdamParamState& s) {
  add_all(b, s.step(), s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq());
}
void add_state(std::string& b, const optim::AdamWParamState& s) {
  add_all(b, s.step(), s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq());
}
void add_state(std::string& b, const optim::RMSpropParamState& s) {
  add_all(b, s.step(), s.square_avg(), s.momentum_buffer(), s.grad_avg());
}
void add_state(std::string& b, const optim::AdagradParamState& s) { add_all(b, s.sum(), s.step()); }

void add_options(std::string& b, const optim::SGDOptions& o) {
  add_all(b, o.lr(), o.momentum(), o.dampening(), o.weight_decay(), int64_t{o.nesterov()});
}
template <typename AdamLike>
void add_adam_options(std::string& b, const AdamLike& o) {
  add_all(b, o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), int64_t{o.amsgrad()});
}
void add_options(std::string& b, const optim::AdamOptions& o) { add_adam_options(b, o); }
void add_options(std::string& b, const optim::AdamWOptions& o) { add_adam_options(b, o); }
void add_options(std::string& b, const optim::RMSpropOptions& o) {
  add_all(b, o.lr(), o.alpha(), o.eps(), o.weight_decay(), o.momentum(), int64_t{o.centered()});
}
void add_options(std::string& b, const optim::AdagradOptions& o) {
  add_all(b, o.lr(), o.lr_decay(), o.weight_decay(), o.initial_accumulator_value(), o.eps());
}

// torch::optim's state key: the TensorImpl's address as a string in 1.x, the address in 2.x.
template <typename Map>
typename Map::key_type key_of(const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream out;
    out << p.unsafeGetTensorImpl();
    return out.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

template <typename Options, typename State>
std::string optimizer_bytes(optim::Optimizer& optimizer) {
  std::string b;
  add_options(b, static_cast<const Options&>(optimizer.defaults()));
  const auto& state = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    add_options(b, static_cast<const Options&>(group.options()));
    for (const auto& p : group.params()) {
      const auto found = state.find(key_of<std::decay_t<decltype(state)>>(p));
      if (found == state.end()) {
        b += "no state;";
      } else {
        add_state(b, static_cast<const State&>(*found->second));
      }
    }
  }
  return b;
}

// Rank 0 has taken steps, the last of three ranks other steps with other options, the rest
// are fresh: after synchronize all hold rank 0's state, and step identically. Then a fresh
// root makes every rank drop its state.
template <typename Opt, typename Options, typename State>
void optimizer_state(const std::string& name, Options roots, Options others) {
  const int r = lockstep::rank();
  const int n = lockstep::world_size();
  torch::manual_seed(r);
  Net net(4);
  lockstep::synchronize(*net);
  auto optimizer = std::make_unique<Opt>(net->parameters(), r == 0 ? roots : others);
  const int own_steps = r == 0 ? 3 : (n > 2 && r == n - 1) ? 1 : 0;
  for (int k = 0; k < own_steps; ++k) train_step(net, *optimizer, 100 * r + k);

  lockstep::synchronize(*net);
  lockstep::synchronize(*optimizer);
  expect_same_as_root(0, optimizer_bytes<Options, State>(*optimizer), name + " state after synchronize");
  if (optimizer->state().empty()) fail(name + " has no state after synchronize from rank 0");
  train_step(net, *optimizer, 999);
  expect_same_as_root(0, module_bytes(*net), name + " parameters after one more step");

  const int last = n - 1;
  if (r == last) optimizer = std::make_unique<Opt>(net->parameters(), others);
  lockstep::synchronize(*net, last);
  lockstep::synchronize(*optimizer, last);
  expect_same_as_root(last, optimizer_bytes<Options, State>(*optimizer),
                      name + " state after synchronize from a fresh root");
  train_step(net, *optimizer, 1000);
  expect_same_as_root(last, module_bytes(*net), name + " parameters after a step from a fresh root");
}

void optimizers() {
  optimizer_state<optim::SGD, optim::SGDOptions, optim::SGDParamState>(
      "SGD", optim::SGDOptions(0.1).momentum(0.9).nesterov(true),
      optim::SGDOptions(0.3).momentum(0.5).weight_decay(0.01));
  optimizer_state<optim::Adam, optim::AdamOptions, optim::AdamParamState>(
      "Adam", optim::AdamOptions(0.01).amsgrad(true).betas({0.8, 0.99}), optim::AdamOptions(0.2));
  optimizer_state<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState>(
      "AdamW", optim::AdamWOptions(0.01).weight_decay(0.1), optim::AdamWOptions(0.05).amsgrad(true));
  optimizer_state<optim::RMSprop, optim::RMSpropOptions, optim::RMSpropParamState>(
      "RMSprop", optim::RMSpropOptions(0.01).momentum(0.9).centered(true), optim::RMSpropOptions(0.02).alpha(0.9));
  optimizer_state<optim::Adagrad, optim::AdagradOptions, optim::AdagradParamState>(
      "Adagrad", optim::AdagradOptions(0.1).lr_decay(0.01).initial_accumulator_value(0.1), optim::AdagradOptions(0.5));
}

void refused_optimizers() {
  Net net(lockstep::rank() == 1 ? 5 : 4);
  optim::Adam mismatched(net->parameters());
  expect_error<lockstep::MismatchError>("MismatchError", [&] { lockstep::synchronize(mismatched); });

  Net same(4);
  optim::LBFGS unsupported(same->parameters());
  expect_error<lockstep::Error>("Error", [&] { lockstep::synchronize(unsupported); });

  // Root's state cannot be received into tensors like the parameters: say so, everywhere.
  optim::Adam corrupt(same->parameters());
  if (lockstep::rank() == 0) {
    train_step(same, corrupt, 0);
    const auto key = key_of<std::decay_t<decltype(corrupt.state())>>(same->fc1->weight);
    static_cast<optim::AdamParamState&>(*corrupt.state().at(key)).exp_avg(torch::zeros({3}));
  }
  expect_error<lockstep::Error>("Error", [&] { lockstep::synchronize(corrupt); });
}

// ---- DistributedOptimizer ----

torch::nn::Sequential mlp(int64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(6, 8), torch::nn::Tanh(), torch::nn::Linear(8, 4));
}

// Rank q's loss on its batch of step s; only rank 0's uses `rank0_only` (others have no
// gradient for it), and no rank uses `unused`.
torch::Tensor loss_of(torch::nn::Sequential& model, const torch::Tensor& rank0_only, int q, int s) {
  const Batch b = batch(1000 * s + q, 4);
  torch::Tensor loss = torch::mse_loss(model->forward(b.x), b.y);
  if (q == 0) loss = loss + 0.1 * (rank0_only * b.x.slice(1, 0, 3)).sum();
  return loss;
}

// Every rank steps on its own batch; the result must be a single process's on all batches.
template <typename Opt, typename Options>
void distributed_optimizer(const std::string& name, Options options, bool with_closure) {
  const int r = lockstep::rank();
  const int n = lockstep::world_size();
  auto model = mlp(r);
  lockstep::synchronize(model);
  torch::Tensor rank0_only = torch::full({3}, 0.5, torch::requires_grad());
  torch::Tensor unused = torch::full({2}, 0.25, torch::requires_grad());
  const auto half_lr = [&] { return std::make_unique<Options>(Options(options).lr(options.lr() / 2)); };
  lockstep::DistributedOptimizer<Opt> distributed(
      {optim::OptimizerParamGroup(model->parameters()), optim::OptimizerParamGroup({rank0_only, unused}, half_lr())},
      options);

  auto reference = mlp(0);
  torch::Tensor ref_rank0_only = rank0_only.detach().clone().requires_grad_();
  Opt single(
      {optim::OptimizerParamGroup(reference->parameters()), optim::OptimizerParamGroup({ref_rank0_only}, half_lr())},
      options);

  for (int s = 0; s < 5; ++s) {
    auto mine = [&] {
      distributed.zero_grad();
      torch::Tensor loss = loss_of(model, rank0_only, r, s);
      loss.backward();
      return loss;
    };
    torch::Tensor reported;
    if (with_closure) {
      reported = distributed.step(mine);
    } else {
      mine();
      distributed.step();
    }
    single.zero_grad();
    torch::Tensor whole = torch::zeros({});
    for (int q = 0; q < n; ++q) whole = whole + loss_of(reference, ref_rank0_only, q, s) / n;
    whole.backward();
    single.step();
    if (with_closure && !torch::allclose(reported, whole.detach(), 1e-6, 1e-7)) {
      fail(name + ": step " + std::to_string(s) + " returned loss " + std::to_string(reported.item<double>()) +
           ", not the average " + std::to_string(whole.item<double>()));
    }
  }
  const auto got = model->parameters(), want = reference->parameters(), init = mlp(0)->parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string which = name + ": parameter " + std::to_string(i);
    if (!torch::allclose(got[i], want[i], 1e-6, 1e-7)) {
      fail(which + " is off from one process's by " + std::to_string((got[i] - want[i]).abs().max().item<double>()));
    }
    if (torch::equal(got[i], init[i])) fail(which + " never moved");
  }
  if (!torch::allclose(rank0_only, ref_rank0_only, 1e-6, 1e-7)) {
    fail(name + ": the parameter only rank 0 uses is off from one process's");
  }
  if (unused.grad().defined() || !torch::equal(unused, torch::full({2}, 0.25))) {
    fail(name + ": a parameter no rank used got a gradient or moved");
  }
  std::string mine;
  for (const auto& group : distributed.param_groups()) {
    for (const auto& p : group.params()) add(mine, p);
  }
  expect_same_as_root(0, mine, name + " parameters");
}

void distributed_optimizers() {
  distributed_optimizer<optim::SGD>("DistributedOptimizer<SGD>", optim::SGDOptions(0.1).momentum(0.9),
                                    /*with_closure=*/false);
  distributed_optimizer<optim::Adam>("DistributedOptimizer<Adam>", optim::AdamOptions(0.01),
                                     /*with_closure=*/false);
  distributed_optimizer<optim::Adam>("DistributedOptimizer<Adam> with a closure", optim::AdamOptions(0.01),
                                     /*with_closure=*/true);
}

}  // namespace

int main(int argc, char** argv) {
  return run_scenario(argc, argv,
                      {{"optimizers", [](int) { optimizers(); }},
                       {"refused-optimizers", [](int) { refused_optimizers(); }},
                       {"distributed-optimizer", [](int) { distributed_optimizers(); }}});
}
