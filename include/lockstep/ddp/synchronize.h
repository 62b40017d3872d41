#pragma once

#include <memory>
#include <type_traits>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "lockstep/comm/process_group.h"
#include "lockstep/optim/synchronize.h"  // for code that included synchronize(torch::optim::...) from here

// Making every rank start from root's copy: after random initialization, after loading a
// checkpoint on one rank. Every rank of the group (the default group unless one is passed)
// must call these together, with the same root (a rank in that group).
namespace lockstep {

/// Copies root's parameters and buffers (recursively, in registration order) into every
/// rank's module, in one collective per dtype. Broadcasts, never averages: averaging random
/// initializations would shrink their variance. Throws MismatchError on every rank, naming
/// the first differing parameter or buffer, when ranks' modules differ in names, shapes or
/// dtypes.
void synchronize(torch::nn::Module& module, int root = 0, const ProcessGroup& group = ProcessGroup());

/// The same for a module held by a torch::nn::ModuleHolder (torch::nn::Linear, ...) or a
/// shared_ptr, so that synchronize(model) works as well as synchronize(*model).
template <typename M>
void synchronize(const torch::nn::ModuleHolder<M>& module, int root = 0, const ProcessGroup& group = ProcessGroup()) {
  synchronize(*module.ptr(), root, group);
}
template <typename M, typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
void synchronize(const std::shared_ptr<M>& module, int root = 0, const ProcessGroup& group = ProcessGroup()) {
  synchronize(*module, root, group);
}

}  // namespace lockstep
