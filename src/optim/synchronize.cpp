#include "lockstep/optim/synchronize.h"

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Type.h>
#include <torch/utils.h>

#include "comm/tensors/agree_with_root.h"
#include "comm/tensors/broadcast_into.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "optim/optimizer_kinds.h"
#include "optim/optimizer_state_table.h"
#include "optim/param_groups.h"

namespace lockstep {
namespace {

// Root broadcasts its options and state tables, every rank shapes its state like root's,
// then root broadcasts the state tensors (one collective per dtype each time).
template <typename Kind>
void synchronize_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params,
                       const std::vector<std::string>& labels, int root, const ProcessGroup& group) {
  const bool is_root = group.rank() == root;
  const auto options = detail::options_of<Kind>(optimizer);
  std::vector<at::Tensor> tables{detail::options_table<Kind>(options), detail::state_table<Kind>(optimizer, params)};
  broadcast(tables, root, group);

  const at::Tensor unlike = (tables[1] == detail::kUnlikeParameter).nonzero();
  if (unlike.size(0) > 0) {
    const int64_t param = unlike[0][0].item<int64_t>();
    const int64_t field = unlike[0][1].item<int64_t>() - 1;
    throw Error("lockstep::synchronize: rank " + std::to_string(root) + "'s " + Kind::name + " state for " +
                labels[param] + ": its " + detail::state_field_names<Kind>()[field] +
                " does not have the parameter's shape and dtype (" + detail::describe(params[param]) +
                "); fix that state (or the checkpoint it came from) on rank " + std::to_string(root));
  }
  if (!is_root) detail::set_options<Kind>(options, tables[0]);
  detail::broadcast_into(detail::match_state<Kind>(optimizer, params, tables[1], is_root), root, group,
                         /*large_alone=*/true);
}

}  // namespace

void synchronize(torch::optim::Optimizer& optimizer, int root, const ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  const auto listed = detail::agree_on_param_groups("lockstep::synchronize", optimizer, root, group);
  const bool supported = detail::visit_kind(
      optimizer, [&](auto k) { synchronize_state<decltype(k)>(optimizer, listed.params, listed.labels, root, group); });
  if (!supported) {
    throw Error("lockstep::synchronize: cannot synchronize the state of " + c10::demangle(typeid(optimizer).name()) +
                "; supported optimizers are " + detail::kSupportedKindNames + " (and classes derived from them)");
  }
}

}  // namespace lockstep
