// A build without NCCL (a CPU libtorch, or no NCCL found beside a CUDA one): groups keep
// their host transport, which CUDA tensors are staged through where the build has CUDA.
#include "comm/device_engine.h"

namespace lockstep {

bool built_with_nccl() { return false; }

std::unique_ptr<Transport> with_device_engine(std::unique_ptr<Transport> host, const WorldSpec&) { return host; }

}  // namespace lockstep
