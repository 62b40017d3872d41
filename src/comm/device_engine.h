#pragma once

// The engine that moves CUDA tensors itself, beside a group's host transport: NCCL, in a
// build against a CUDA libtorch whose NCCL CMake found (src/cuda/nccl_transport.cpp).
// Without it, device tensors are staged through the host transport (comm/device_call.h).

#include <memory>

#include "comm/environment.h"
#include "comm/transport.h"

namespace lockstep {

/// Whether this build has the NCCL transport.
bool built_with_nccl();

/// `host`, with NCCL beside it for CUDA tensors where `spec.cuda_backend` may use it
/// (Nccl, or Auto on a machine with a GPU); `host` itself otherwise.
std::unique_ptr<Transport> with_device_engine(std::unique_ptr<Transport> host, const WorldSpec& spec);

}  // namespace lockstep
