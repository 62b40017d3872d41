#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/transports/transport.h"
#include "comm/world/world.h"

namespace lockstep {

/// Small strings from every rank of the parent group, indexed by world rank ("" for ranks
/// outside the parent).
using GatherOverParent = std::function<std::vector<std::string>(const std::string& mine)>;

/// The transports of a group of `members` (world ranks, in group order). Its host transport:
/// shared memory when they share one host, the host backend when none do, and both,
/// hierarchically, otherwise. Its device transports: NCCL for CUDA tensors where the spec
/// and the build allow (comm/transports/device_transports.h). Every rank of the parent calls it with the
/// same arguments; non-members get no host transport. `name` is unique among the world's
/// groups.
GroupTransports connect_group(World& world, const std::vector<int>& members, const std::string& name,
                              const GatherOverParent& gather);

}  // namespace lockstep
