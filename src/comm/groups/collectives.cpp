#include "lockstep/comm/collectives.h"

#include "comm/groups/process_group.h"

namespace lockstep {

bool is_supported_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kByte: return true;
    default: return false;
  }
}

void all_reduce(at::Tensor& tensor, ReduceOp op, const ProcessGroup& group) {
  communicator_of(group, "all_reduce").all_reduce({tensor}, op, /*blocking=*/true);
}

Work all_reduce_async(at::Tensor tensor, ReduceOp op, const ProcessGroup& group) {
  return communicator_of(group, "all_reduce").all_reduce({std::move(tensor)}, op, /*blocking=*/false);
}

void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op, const ProcessGroup& group) {
  communicator_of(group, "all_reduce").all_reduce(tensors, op, /*blocking=*/true);
}

Work all_reduce_async(std::vector<at::Tensor> tensors, ReduceOp op, const ProcessGroup& group) {
  return communicator_of(group, "all_reduce").all_reduce(std::move(tensors), op, /*blocking=*/false);
}

void broadcast(at::Tensor& tensor, int root, const ProcessGroup& group) {
  communicator_of(group, "broadcast").broadcast({tensor}, root, /*blocking=*/true);
}

Work broadcast_async(at::Tensor tensor, int root, const ProcessGroup& group) {
  return communicator_of(group, "broadcast").broadcast({std::move(tensor)}, root, /*blocking=*/false);
}

void broadcast(std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group) {
  communicator_of(group, "broadcast").broadcast(tensors, root, /*blocking=*/true);
}

Work broadcast_async(std::vector<at::Tensor> tensors, int root, const ProcessGroup& group) {
  return communicator_of(group, "broadcast").broadcast(std::move(tensors), root, /*blocking=*/false);
}

void reduce(at::Tensor& tensor, int root, ReduceOp op, const ProcessGroup& group) {
  communicator_of(group, "reduce").reduce(tensor, root, op, /*blocking=*/true);
}

Work reduce_async(at::Tensor tensor, int root, ReduceOp op, const ProcessGroup& group) {
  return communicator_of(group, "reduce").reduce(std::move(tensor), root, op, /*blocking=*/false);
}

std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const ProcessGroup& group) {
  return communicator_of(group, "all_gather").all_gather(tensor, /*blocking=*/true).result();
}

Work all_gather_async(at::Tensor tensor, const ProcessGroup& group) {
  return communicator_of(group, "all_gather").all_gather(std::move(tensor), /*blocking=*/false);
}

at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op, const ProcessGroup& group) {
  return communicator_of(group, "reduce_scatter").reduce_scatter(input, op, /*blocking=*/true).result().at(0);
}

Work reduce_scatter_async(at::Tensor input, ReduceOp op, const ProcessGroup& group) {
  return communicator_of(group, "reduce_scatter").reduce_scatter(std::move(input), op, /*blocking=*/false);
}

void reduce_to_owners(at::Tensor& tensor, std::vector<OwnedRange> ranges, ReduceOp op, const ProcessGroup& group) {
  communicator_of(group, "reduce_to_owners").reduce_to_owners(tensor, std::move(ranges), op, /*blocking=*/true);
}

Work reduce_to_owners_async(at::Tensor tensor, std::vector<OwnedRange> ranges, ReduceOp op, const ProcessGroup& group) {
  return communicator_of(group, "reduce_to_owners")
      .reduce_to_owners(std::move(tensor), std::move(ranges), op, /*blocking=*/false);
}

at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, const ProcessGroup& group) {
  return communicator_of(group, "empty_shared").empty_shared(sizes, dtype);
}

void barrier(const ProcessGroup& group) { communicator_of(group, "barrier").barrier(/*blocking=*/true); }

Work barrier_async(const ProcessGroup& group) { return communicator_of(group, "barrier").barrier(/*blocking=*/false); }

}  // namespace lockstep
