#include "comm/mpi_communicator.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "comm/reduce_kernels.h"
#include "comm/rendezvous.h"
#include "lockstep/comm/error.h"

namespace lockstep {
namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string("lockstep: ") + what + " failed: " + text);
}

MPI_Datatype datatype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kHalf: case at::kBFloat16: return MPI_UINT16_T;  // reduced by our own ops
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
  const std::pair<ReduceOp, MPI_User_function*> functions[] = {
      {ReduceOp::Sum, &mpi_reduce<T, ReduceOp::Sum>},
      {ReduceOp::Product, &mpi_reduce<T, ReduceOp::Product>},
      {ReduceOp::Min, &mpi_reduce<T, ReduceOp::Min>},
      {ReduceOp::Max, &mpi_reduce<T, ReduceOp::Max>}};
  for (const auto& [op, function] : functions) {
    MPI_Op handle;
    check(MPI_Op_create(function, /*commute=*/1, &handle), "MPI_Op_create");
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

MpiCommunicator::MpiCommunicator(MPI_Comm world, std::chrono::milliseconds timeout, bool debug)
    : Communicator(
          [&] { int r = 0; MPI_Comm_rank(world, &r); return r; }(),
          [&] { int n = 1; MPI_Comm_size(world, &n); return n; }(), timeout, debug),
      comm_(world) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  add_custom_ops<c10::Half>(at::kHalf, custom_ops_);
  add_custom_ops<c10::BFloat16>(at::kBFloat16, custom_ops_);
  watchdog_ = std::thread([this] { watch(); });
}

MpiCommunicator::~MpiCommunicator() {
  stop_worker();
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stop_watching_ = true;
  }
  watch_stop_.notify_all();
  watchdog_.join();
  for (auto& entry : custom_ops_) MPI_Op_free(&entry.second);
  MPI_Comm_free(&comm_);
}

void MpiCommunicator::watch() {
  const auto period = std::min<std::chrono::milliseconds>(timeout() / 10 + std::chrono::milliseconds(1),
                                                          std::chrono::seconds(1));
  std::unique_lock<std::mutex> lock(watch_mutex_);
  while (!watch_stop_.wait_for(lock, period, [&] { return stop_watching_; })) {
    const auto now_running = running();
    if (!now_running || now_running->second < timeout()) continue;
    // An MPI call cannot be cancelled: ending the job is the only way not to hang forever.
    std::fprintf(stderr,
                 "lockstep: rank %d: %s did not complete within %.1f s: a rank died, hangs, or "
                 "called a different collective. Ending the job.\n",
                 rank(), now_running->first.c_str(),
                 std::chrono::duration<double>(timeout()).count());
    std::fflush(stderr);
    std::_Exit(EXIT_FAILURE);
  }
}

MPI_Op MpiCommunicator::op_for(at::ScalarType dtype, ReduceOp op) const {
  const auto custom = custom_ops_.find({dtype, op});
  return custom != custom_ops_.end() ? custom->second : builtin_op(op);
}

void MpiCommunicator::run_all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t) {
  check(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), count_of(tensor),
                      datatype(tensor.scalar_type()), op_for(tensor.scalar_type(), op), comm_),
        "MPI_Allreduce");
}

void MpiCommunicator::run_broadcast(at::Tensor& tensor, int root, uint32_t) {
  check(MPI_Bcast(tensor.data_ptr(), count_of(tensor), datatype(tensor.scalar_type()), root, comm_),
        "MPI_Bcast");
}

void MpiCommunicator::run_reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t) {
  const bool is_root = rank() == root;
  check(MPI_Reduce(is_root ? MPI_IN_PLACE : tensor.data_ptr(), is_root ? tensor.data_ptr() : nullptr,
                   count_of(tensor), datatype(tensor.scalar_type()),
                   op_for(tensor.scalar_type(), op), root, comm_),
        "MPI_Reduce");
}

void MpiCommunicator::run_all_gather(const at::Tensor& input, at::Tensor& output, uint32_t) {
  const MPI_Datatype type = datatype(input.scalar_type());
  count_of(output);
  check(MPI_Allgather(input.data_ptr(), count_of(input), type, output.data_ptr(),
                      count_of(input), type, comm_),
        "MPI_Allgather");
}

void MpiCommunicator::run_reduce_scatter(const at::Tensor& input, at::Tensor& output,
                                         ReduceOp op, uint32_t) {
  count_of(input);
  check(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(), count_of(output),
                                 datatype(input.scalar_type()),
                                 op_for(input.scalar_type(), op), comm_),
        "MPI_Reduce_scatter_block");
}

void MpiCommunicator::run_barrier(uint32_t) { check(MPI_Barrier(comm_), "MPI_Barrier"); }

void MpiCommunicator::all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t) {
  check(MPI_Allgather(input, static_cast<int>(bytes), MPI_BYTE, output, static_cast<int>(bytes),
                      MPI_BYTE, comm_),
        "MPI_Allgather");
}

bool MpiCommunicator::same_fingerprint_everywhere(uint64_t fingerprint) {
  // max(f) and max(~f) = ~min(f) in one tiny call: equal everywhere iff max(f) == min(f).
  uint64_t both[2] = {fingerprint, ~fingerprint};
  check(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_UINT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  return both[0] == ~both[1];
}

Group join_mpi_group(const WorldSpec& spec) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Collectives run on the caller's thread or on one background thread, never both at once.
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      throw ConfigError("lockstep: this MPI library does not support MPI_THREAD_SERIALIZED");
    }
  }
  MPI_Comm world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  if (size != spec.world_size || rank != spec.rank) {
    MPI_Comm_free(&world);
    throw ConfigError("lockstep: MPI reports rank " + std::to_string(rank) + " of " +
                      std::to_string(size) + " but the environment says rank " +
                      std::to_string(spec.rank) + " of " + std::to_string(spec.world_size) +
                      "; launch the mpi backend with `mpirun -n " + std::to_string(spec.world_size) +
                      "` (or `lockstep run --backend mpi`)");
  }
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  Group group;
  MPI_Comm_rank(node, &group.local_rank);
  MPI_Comm_size(node, &group.local_world_size);
  MPI_Comm_free(&node);
  group.communicator = std::make_unique<MpiCommunicator>(world, spec.timeout, spec.debug);
  return group;
}

}  // namespace lockstep
