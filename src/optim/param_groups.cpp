#include "optim/param_groups.h"

#include <c10/util/Type.h>

#include "comm/tensors/agree_with_root.h"
#include "optim/optimizer_kinds.h"

namespace lockstep::detail {

std::vector<at::Tensor> parameters_of(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> params;
  for (const auto& group : optimizer.param_groups())
    params.insert(params.end(), group.params().begin(), group.params().end());
  return params;
}

ParamGroupsLabels agree_on_param_groups(const std::string& who, torch::optim::Optimizer& optimizer, int root,
                                        const ProcessGroup& group) {
  const std::string type = c10::demangle(typeid(optimizer).name());
  std::string kind = "unsupported " + type;
  visit_kind(optimizer, [&](auto k) { kind = decltype(k)::name; });

  std::vector<Entry> entries{{"the optimizer type", kind}};
  ParamGroupsLabels listed;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string param_group = "param group " + std::to_string(g);
    entries.push_back({param_group, std::to_string(groups[g].params().size()) + " parameters"});
    for (size_t i = 0; i < groups[g].params().size(); ++i) {
      listed.labels.push_back(param_group + ", parameter " + std::to_string(i));
      listed.params.push_back(groups[g].params()[i]);
      entries.push_back({listed.labels.back(), describe(listed.params.back())});
    }
  }
  agree_with_root(who, "optimizer", entries, root, group);
  return listed;
}

}  // namespace lockstep::detail
