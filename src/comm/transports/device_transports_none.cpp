// A build without NCCL (a CPU libtorch, or no NCCL found beside a CUDA one): groups have
// their host transport only, which CUDA tensors are staged through where the build has CUDA.
#include "comm/transports/device_transports.h"

namespace lockstep {

bool built_with_nccl() { return false; }

DeviceTransports device_transports(HostTransport&, DeviceBackend, std::chrono::milliseconds) { return {}; }

}  // namespace lockstep
