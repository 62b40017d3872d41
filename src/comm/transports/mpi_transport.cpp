#include "comm/transports/mpi_transport.h"

#include <climits>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "comm/transports/reduce_kernels.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

MPI_Datatype datatype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kHalf:
    case at::kBFloat16: return MPI_UINT16_T;  // reduced by our own ops
    default: break;
  }
  throw Error(std::string("lockstep: MPI cannot carry dtype ") + c10::toString(dtype));
}

MPI_Op builtin_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Product: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Avg: break;
  }
  throw Error("lockstep: internal error: MPI has no " + to_string(op));
}

// MPI's signature for user-defined reductions: inout = in op inout.
template <typename T, ReduceOp Op>
void mpi_reduce(void* in, void* inout, int* count, MPI_Datatype*) {
  reduce_elements<T, Op>(inout, in, inout, static_cast<size_t>(*count));
}

template <typename T>
void add_custom_ops(at::ScalarType dtype, std::map<std::pair<at::ScalarType, ReduceOp>, MPI_Op>& ops) {
  const std::pair<ReduceOp, MPI_User_function*> functions[] = {{ReduceOp::Sum, &mpi_reduce<T, ReduceOp::Sum>},
                                                               {ReduceOp::Product, &mpi_reduce<T, ReduceOp::Product>},
                                                               {ReduceOp::Min, &mpi_reduce<T, ReduceOp::Min>},
                                                               {ReduceOp::Max, &mpi_reduce<T, ReduceOp::Max>}};
  for (const auto& [op, function] : functions) {
    MPI_Op handle;
    check_mpi(MPI_Op_create(function, /*commute=*/1, &handle), "MPI_Op_create");
    ops[{dtype, op}] = handle;
  }
}

int count_of(const at::Tensor& tensor) {
  if (tensor.numel() > INT_MAX) {
    throw Error("lockstep: the MPI backend moves at most " + std::to_string(INT_MAX) +
                " elements per call; split the tensor of " + std::to_string(tensor.numel()));
  }
  return static_cast<int>(tensor.numel());
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  add_custom_ops<c10::Half>(at::kHalf, custom_ops_);
  add_custom_ops<c10::BFloat16>(at::kBFloat16, custom_ops_);
}

MpiTransport::~MpiTransport() {
  for (auto& entry : custom_ops_) MPI_Op_free(&entry.second);
  MPI_Comm_free(&comm_);
}

MPI_Op MpiTransport::op_for(at::ScalarType dtype, ReduceOp op) const {
  const auto custom = custom_ops_.find({dtype, op});
  return custom != custom_ops_.end() ? custom->second : builtin_op(op);
}

void MpiTransport::all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t) {
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), count_of(tensor), datatype(tensor.scalar_type()),
                          op_for(tensor.scalar_type(), op), comm_),
            "MPI_Allreduce");
}

void MpiTransport::exchange_with_peer(const void* send, size_t send_bytes, void* receive, size_t receive_bytes,
                                      uint32_t) {
  // Calls are made in one order everywhere, so one tag serves them all.
  constexpr int kPairTag = 29;
  const int peer = 1 - rank_;
  check_mpi(MPI_Sendrecv(send, static_cast<int>(send_bytes), MPI_BYTE, peer, kPairTag, receive,
                         static_cast<int>(receive_bytes), MPI_BYTE, peer, kPairTag, comm_, MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
}

void MpiTransport::broadcast(at::Tensor& tensor, int root, uint32_t) {
  check_mpi(MPI_Bcast(tensor.data_ptr(), count_of(tensor), datatype(tensor.scalar_type()), root, comm_), "MPI_Bcast");
}

void MpiTransport::reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t) {
  const bool is_root = rank() == root;
  check_mpi(MPI_Reduce(is_root ? MPI_IN_PLACE : tensor.data_ptr(), is_root ? tensor.data_ptr() : nullptr,
                       count_of(tensor), datatype(tensor.scalar_type()), op_for(tensor.scalar_type(), op), root, comm_),
            "MPI_Reduce");
}

void MpiTransport::all_gather(const at::Tensor& input, at::Tensor& output, uint32_t) {
  const MPI_Datatype type = datatype(input.scalar_type());
  count_of(output);
  check_mpi(MPI_Allgather(input.data_ptr(), count_of(input), type, output.data_ptr(), count_of(input), type, comm_),
            "MPI_Allgather");
}

void MpiTransport::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t) {
  count_of(input);
  check_mpi(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(), count_of(output),
                                     datatype(input.scalar_type()), op_for(input.scalar_type(), op), comm_),
            "MPI_Reduce_scatter_block");
}

void MpiTransport::barrier(uint32_t) { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

void MpiTransport::all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t) {
  check_mpi(MPI_Allgather(input, static_cast<int>(bytes), MPI_BYTE, output, static_cast<int>(bytes), MPI_BYTE, comm_),
            "MPI_Allgather");
}

bool MpiTransport::same_fingerprint_everywhere(uint64_t fingerprint) {
  // max(f) and max(~f) = ~min(f) in one tiny call: equal everywhere iff max(f) == min(f).
  uint64_t both[2] = {fingerprint, ~fingerprint};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_UINT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  return both[0] == ~both[1];
}

void start_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    throw ConfigError(
        "lockstep: this MPI library does not support MPI_THREAD_MULTIPLE, which "
        "process groups running side by side need; use the gloo backend");
  }
}

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string("lockstep: ") + what + " failed: " + text);
}

}  // namespace lockstep
