#pragma once

// The transports that move device memory themselves, beside a group's host transport: NCCL
// for CUDA, in a build against a CUDA libtorch whose NCCL CMake found
// (src/comm/transports/nccl_transport.cpp). Without one, a group stages device tensors through its host
// transport (comm/transports/device_call.h).

#include <chrono>

#include "comm/transports/transport.h"

namespace lockstep {

/// Whether this build has the NCCL transport.
bool built_with_nccl();

/// The device transports of a group of more than one rank whose host transport is `host`:
/// NCCL for CUDA where `backend` may use it (Nccl, or Auto on a machine with a GPU), none
/// otherwise. Connects nothing yet: each device connects in its first call, within `timeout`.
DeviceTransports device_transports(HostTransport& host, DeviceBackend backend, std::chrono::milliseconds timeout);

}  // namespace lockstep
