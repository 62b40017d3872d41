#include "lockstep/ddp/synchronize.h"

#include <string>
#include <vector>

#include <torch/utils.h>

#include "comm/tensors/agree_with_root.h"
#include "comm/tensors/broadcast_into.h"

namespace lockstep {

void synchronize(torch::nn::Module& module, int root, const ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  std::vector<detail::Entry> entries;
  std::vector<at::Tensor> tensors;
  auto add = [&](const std::string& kind, const auto& named) {
    for (const auto& item : named) {
      if (!item.value().defined()) continue;
      entries.push_back({kind + " '" + item.key() + "'", detail::describe(item.value())});
      tensors.push_back(item.value());
    }
  };
  add("parameter", module.named_parameters(/*recurse=*/true));
  add("buffer", module.named_buffers(/*recurse=*/true));
  detail::agree_with_root("lockstep::synchronize", "module", entries, root, group);
  detail::broadcast_into(tensors, root, group, /*large_alone=*/true);
}

}  // namespace lockstep
