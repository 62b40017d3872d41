#pragma once

#include <tuple>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

// What each supported torch::optim optimizer keeps, listed field by field, so that
// synchronize(optimizer) can move it without knowing the algorithms. each_option visits a
// param group's options (numbers and flags); each_state_field visits one parameter's state
// (int64 step counts and tensors shaped like the parameter), by name.
namespace lockstep::detail {

struct SgdKind {
  using Optimizer = torch::optim::SGD;
  using Options = torch::optim::SGDOptions;
  using State = torch::optim::SGDParamState;
  static constexpr const char* name = "SGD";

  template <typename F>
  static void each_option(Options& o, F&& f) {
    f(o.lr());
    f(o.momentum());
    f(o.dampening());
    f(o.weight_decay());
    f(o.nesterov());
  }
  template <typename F>
  static void each_state_field(State& s, F&& f) {
    f("momentum_buffer", s.momentum_buffer());
  }
};

// Adam and AdamW keep the same fields in distinct, unrelated types.
template <typename Opt, typename Opts, typename St>
struct AdamFamilyKind {
  using Optimizer = Opt;
  using Options = Opts;
  using State = St;

  template <typename F>
  static void each_option(Options& o, F&& f) {
    f(o.lr());
    f(std::get<0>(o.betas()));
    f(std::get<1>(o.betas()));
    f(o.eps());
    f(o.weight_decay());
    f(o.amsgrad());
  }
  template <typename F>
  static void each_state_field(State& s, F&& f) {
    f("step", s.step());
    f("exp_avg", s.exp_avg());
    f("exp_avg_sq", s.exp_avg_sq());
    f("max_exp_avg_sq", s.max_exp_avg_sq());
  }
};

struct AdamKind : AdamFamilyKind<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState> {
  static constexpr const char* name = "Adam";
};

struct AdamWKind : AdamFamilyKind<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState> {
  static constexpr const char* name = "AdamW";
};

struct RmspropKind {
  using Optimizer = torch::optim::RMSprop;
  using Options = torch::optim::RMSpropOptions;
  using State = torch::optim::RMSpropParamState;
  static constexpr const char* name = "RMSprop";

  template <typename F>
  static void each_option(Options& o, F&& f) {
    f(o.lr());
    f(o.alpha());
    f(o.eps());
    f(o.weight_decay());
    f(o.momentum());
    f(o.centered());
  }
  template <typename F>
  static void each_state_field(State& s, F&& f) {
    f("step", s.step());
    f("square_avg", s.square_avg());
    f("momentum_buffer", s.momentum_buffer());
    f("grad_avg", s.grad_avg());
  }
};

struct AdagradKind {
  using Optimizer = torch::optim::Adagrad;
  using Options = torch::optim::AdagradOptions;
  using State = torch::optim::AdagradParamState;
  static constexpr const char* name = "Adagrad";

  template <typename F>
  static void each_option(Options& o, F&& f) {
    f(o.lr());
    f(o.lr_decay());
    f(o.weight_decay());
    f(o.initial_accumulator_value());
    f(o.eps());
  }
  template <typename F>
  static void each_state_field(State& s, F&& f) {
    f("sum", s.sum());
    f("step", s.step());
  }
};

using SupportedKinds = std::tuple<SgdKind, AdamKind, AdamWKind, RmspropKind, AdagradKind>;
constexpr const char* kSupportedKindNames = "SGD, Adam, AdamW, RMSprop and Adagrad";

/// Calls `f(Kind{})` for the kind `optimizer` is (or derives from); false when none.
template <typename F>
bool visit_kind(torch::optim::Optimizer& optimizer, F&& f) {
  return std::apply(
      [&](auto... kinds) {
        return ((dynamic_cast<typename decltype(kinds)::Optimizer*>(&optimizer) != nullptr && (f(kinds), true)) || ...);
      },
      SupportedKinds{});
}

}  // namespace lockstep::detail
