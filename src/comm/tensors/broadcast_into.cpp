#include "comm/tensors/broadcast_into.h"

#include "comm/calls/call.h"
#include "comm/tensors/tensors_by_device.h"
#include "lockstep/comm/collectives.h"

namespace lockstep::detail {

void broadcast_into(const std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group) {
  for (const auto& indices : indices_by_device(tensors)) {
    std::vector<at::Tensor> staged, wire;
    for (size_t i : indices) {
      staged.push_back(tensors[i].contiguous());
      wire.push_back(is_supported_dtype(tensors[i].scalar_type()) ? staged.back()
                                                                  : staged.back().view(-1).view(at::kByte));
    }
    broadcast(wire, root, group);
    if (group.rank() == root) continue;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!staged[k].is_same(tensors[indices[k]])) tensors[indices[k]].copy_(staged[k]);
    }
  }
}

}  // namespace lockstep::detail
