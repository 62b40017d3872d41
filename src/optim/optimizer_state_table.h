#pragma once

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "lockstep/comm/collectives.h"
#include "lockstep/comm/process_group.h"

// An optimizer's options and per-parameter state as plain tables of numbers, which root can
// broadcast, and the state made to match such a table on the other ranks. `Kind` is one of
// optimizer_kinds.h; parameters are listed in param-group order.
namespace lockstep::detail {

// torch::optim keys state by the parameter's TensorImpl: its address printed into a string in
// libtorch 1.x (as c10::guts::to_string prints it), the address itself in 2.x.
template <typename StateMap>
typename StateMap::key_type state_key(const at::Tensor& param) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream out;
    out << param.unsafeGetTensorImpl();
    return out.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

template <typename T>
inline constexpr bool is_tensor = std::is_same_v<std::decay_t<T>, at::Tensor>;

// How a state table records a state tensor (a step count is recorded as itself).
inline constexpr int64_t kUndefined = 0;
inline constexpr int64_t kLikeParameter = 1;
inline constexpr int64_t kUnlikeParameter = 2;  // cannot be received into one like the parameter

inline bool is_like(const at::Tensor& t, const at::Tensor& param) {
  return t.sizes() == param.sizes() && t.scalar_type() == param.scalar_type();
}

template <typename Kind>
std::vector<std::string> state_field_names() {
  typename Kind::State probe;
  std::vector<std::string> names;
  Kind::each_state_field(probe, [&](const char* name, auto&) { names.emplace_back(name); });
  return names;
}

// The defaults, then each param group's options: the objects options tables describe.
template <typename Kind>
std::vector<typename Kind::Options*> options_of(torch::optim::Optimizer& optimizer) {
  using Options = typename Kind::Options;
  std::vector<Options*> options{&static_cast<Options&>(optimizer.defaults())};
  for (auto& group : optimizer.param_groups()) {
    options.push_back(&static_cast<Options&>(group.options()));
  }
  return options;
}

// One row of numbers per options object of options_of (flags as 0 and 1).
template <typename Kind>
at::Tensor options_table(const std::vector<typename Kind::Options*>& options) {
  std::vector<std::vector<double>> rows;
  for (auto* o : options) {
    rows.emplace_back();
    Kind::each_option(*o, [&](auto& value) { rows.back().push_back(static_cast<double>(value)); });
  }
  at::Tensor table =
      at::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size())}, at::kDouble);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy(rows[i].begin(), rows[i].end(), table[i].data_ptr<double>());
  }
  return table;
}

template <typename Kind>
void set_options(const std::vector<typename Kind::Options*>& options, const at::Tensor& table) {
  for (size_t i = 0; i < options.size(); ++i) {
    const double* row = table[i].data_ptr<double>();
    Kind::each_option(*options[i], [&](auto& value) { value = static_cast<std::decay_t<decltype(value)>>(*row++); });
  }
}

// `root`'s options of every param group (lr, betas, ...) on every rank of `group`.
template <typename Kind>
void broadcast_options(torch::optim::Optimizer& optimizer, int root, const ProcessGroup& group) {
  const auto options = options_of<Kind>(optimizer);
  at::Tensor table = options_table<Kind>(options);
  broadcast(table, root, group);
  if (group.rank() != root) set_options<Kind>(options, table);
}

// One row per parameter: 1 when it has state (else 0), then each state field in
// each_state_field's order, as above.
template <typename Kind>
at::Tensor state_table(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params) {
  using State = typename Kind::State;
  auto& state = optimizer.state();
  using StateMap = std::decay_t<decltype(state)>;
  const auto width = static_cast<int64_t>(state_field_names<Kind>().size()) + 1;
  at::Tensor table = at::zeros({static_cast<int64_t>(params.size()), width}, at::kLong);
  for (size_t i = 0; i < params.size(); ++i) {
    auto found = state.find(state_key<StateMap>(params[i]));
    if (found == state.end() || !found->second) continue;
    int64_t* row = table[i].data_ptr<int64_t>();
    *row++ = 1;
    Kind::each_state_field(static_cast<State&>(*found->second), [&](const char*, auto& field) {
      if constexpr (is_tensor<decltype(field)>) {
        *row++ = !field.defined() ? kUndefined : is_like(field, params[i]) ? kLikeParameter : kUnlikeParameter;
      } else {
        *row++ = static_cast<int64_t>(field);
      }
    });
  }
  return table;
}

// Makes this rank's state have the shape `table` (root's) says, creating and dropping state
// and tensors, and returns the tensors to receive root's values in, in the same order on every
// rank. Root's own state is left as it is.
template <typename Kind>
std::vector<at::Tensor> match_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params,
                                    const at::Tensor& table, bool is_root) {
  using State = typename Kind::State;
  auto& state = optimizer.state();
  using StateMap = std::decay_t<decltype(state)>;
  std::vector<at::Tensor> receivers;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t* row = table[i].data_ptr<int64_t>();
    const auto key = state_key<StateMap>(params[i]);
    if (*row++ == 0) {
      if (!is_root) state.erase(key);
      continue;
    }
    auto& slot = state[key];
    if (!slot) slot = std::make_unique<State>();
    Kind::each_state_field(static_cast<State&>(*slot), [&](const char*, auto& field) {
      const int64_t value = *row++;
      if constexpr (is_tensor<decltype(field)>) {
        if (value == kUndefined) {
          field = at::Tensor();
          return;
        }
        if (!field.defined() || !is_like(field, params[i])) {
          field = at::empty_like(params[i], at::MemoryFormat::Contiguous);
        }
        receivers.push_back(field);
      } else {
        field = static_cast<std::decay_t<decltype(field)>>(value);
      }
    });
  }
  return receivers;
}

// Moves each parameter's state tensors to the parameter's device: state read from a
// checkpoint onto the CPU, for parameters on a GPU (or the other way round).
template <typename Kind>
void move_state_to_parameters(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params) {
  using State = typename Kind::State;
  auto& state = optimizer.state();
  using StateMap = std::decay_t<decltype(state)>;
  for (const auto& param : params) {
    auto found = state.find(state_key<StateMap>(param));
    if (found == state.end() || !found->second) continue;
    Kind::each_state_field(static_cast<State&>(*found->second), [&](const char*, auto& field) {
      if constexpr (is_tensor<decltype(field)>) {
        if (field.defined() && field.device() != param.device()) field = field.to(param.device());
      }
    });
  }
}

}  // namespace lockstep::detail
