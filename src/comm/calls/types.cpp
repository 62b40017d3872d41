#include "lockstep/comm/types.h"

namespace lockstep {

std::string to_string(Backend backend) {
  switch (backend) {
    case Backend::Auto: return "auto";
    case Backend::Gloo: return "gloo";
    case Backend::Mpi: return "mpi";
    case Backend::Nccl: return "nccl";
    case Backend::Threads: return "threads";
  }
  return "unknown";
}

std::string to_string(DeviceBackend backend) {
  switch (backend) {
    case DeviceBackend::Auto: return "auto";
    case DeviceBackend::Staged: return "staged";
    case DeviceBackend::Nccl: return "nccl";
  }
  return "unknown";
}

std::string to_string(InitMethod method) {
  switch (method) {
    case InitMethod::Auto: return "auto";
    case InitMethod::Tcp: return "tcp";
    case InitMethod::File: return "file";
    case InitMethod::Mpi: return "mpi";
  }
  return "unknown";
}

std::string to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "Sum";
    case ReduceOp::Avg: return "Avg";
    case ReduceOp::Min: return "Min";
    case ReduceOp::Max: return "Max";
    case ReduceOp::Product: return "Product";
  }
  return "unknown";
}

}  // namespace lockstep
