#include "comm/tensors/broadcast_into.h"

#include "comm/calls/call.h"
#include "comm/tensors/tensors_by_device.h"
#include "lockstep/comm/collectives.h"

namespace lockstep::detail {
namespace {

// With large_alone, a tensor this large travels alone, in place: packing it with others
// would copy it into a new buffer and out again, and on a VM each fresh page of that buffer
// costs a fault (a ResNet-50 with Adam healed 30 times slower packed, bench/heal).
constexpr int64_t kAloneFromBytes = 1 << 20;

}  // namespace

void broadcast_into(const std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group, bool large_alone) {
  for (const auto& indices : indices_by_device(tensors)) {
    std::vector<at::Tensor> staged, wire;
    for (size_t i : indices) {
      staged.push_back(tensors[i].contiguous());
      wire.push_back(is_supported_dtype(tensors[i].scalar_type()) ? staged.back()
                                                                  : staged.back().view(-1).view(at::kByte));
    }
    // The same split on every rank: the tensors' shapes and dtypes agree (agree_with_root).
    std::vector<at::Tensor> packed;
    for (auto& tensor : wire) {
      if (large_alone && static_cast<int64_t>(tensor.nbytes()) >= kAloneFromBytes) {
        broadcast(tensor, root, group);
      } else {
        packed.push_back(tensor);
      }
    }
    if (!packed.empty()) broadcast(packed, root, group);
    if (group.rank() == root) continue;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!staged[k].is_same(tensors[indices[k]])) tensors[indices[k]].copy_(staged[k]);
    }
  }
}

}  // namespace lockstep::detail
