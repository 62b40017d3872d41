#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/process_group.h"
#include "lockstep/comm/types.h"
#include "lockstep/comm/work.h"

// Collectives on a process group: the default group made by init() unless one is passed
// (roots are ranks in that group). Tensors must be contiguous tensors of float32, float64,
// float16, bfloat16, int32, int64 or uint8, all on one device per call: the CPU, or a CUDA
// device (moved by the group's device backend, NCCL or staged through host memory;
// docs/GPU.md). Every rank of the group must call the same collectives in the same order
// with the same shapes and dtypes. Avg of float16 and bfloat16 is summed in float64 and
// rounded once, so it cannot overflow where the mean is finite; their Sum stays in the
// dtype and may overflow. Over NCCL, Avg of floating dtypes is NCCL's own (ncclAvg: each
// value scaled by 1/size, then summed in the dtype): it cannot overflow either, but its
// rounding differs from the host transports'.
namespace lockstep {

/// Whether collectives carry tensors of this dtype.
bool is_supported_dtype(at::ScalarType dtype);

/// Reduces `tensor` in place across ranks.
void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::Sum, const ProcessGroup& group = ProcessGroup());
Work all_reduce_async(at::Tensor tensor, ReduceOp op = ReduceOp::Sum, const ProcessGroup& group = ProcessGroup());

/// Reduces many tensors in one collective per dtype (they are packed into one buffer).
void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum,
                const ProcessGroup& group = ProcessGroup());
Work all_reduce_async(std::vector<at::Tensor> tensors, ReduceOp op = ReduceOp::Sum,
                      const ProcessGroup& group = ProcessGroup());

/// Copies root's tensor into every rank's tensor.
void broadcast(at::Tensor& tensor, int root = 0, const ProcessGroup& group = ProcessGroup());
Work broadcast_async(at::Tensor tensor, int root = 0, const ProcessGroup& group = ProcessGroup());

/// Broadcasts many tensors in one collective per dtype (they are packed into one buffer).
void broadcast(std::vector<at::Tensor>& tensors, int root = 0, const ProcessGroup& group = ProcessGroup());
Work broadcast_async(std::vector<at::Tensor> tensors, int root = 0, const ProcessGroup& group = ProcessGroup());

/// Reduces into root's tensor; other ranks' tensors are left unchanged.
void reduce(at::Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::Sum, const ProcessGroup& group = ProcessGroup());
Work reduce_async(at::Tensor tensor, int root = 0, ReduceOp op = ReduceOp::Sum,
                  const ProcessGroup& group = ProcessGroup());

/// Every rank's tensor, in rank order.
std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const ProcessGroup& group = ProcessGroup());
Work all_gather_async(at::Tensor tensor, const ProcessGroup& group = ProcessGroup());

/// Reduces `input` across ranks and returns this rank's slice of it along dimension 0,
/// whose size must be divisible by the group size.
at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op = ReduceOp::Sum,
                          const ProcessGroup& group = ProcessGroup());
Work reduce_scatter_async(at::Tensor input, ReduceOp op = ReduceOp::Sum, const ProcessGroup& group = ProcessGroup());

/// Reduces `tensor` in place where each range's owner needs the result (ZeRO-2's gradient
/// buckets): after it, the elements of this rank's ranges and of kEveryRank's hold the
/// reduced values, the others what the transport left there. Every rank passes the same
/// ranges, which cover the tensor. The sums are all_reduce's, bit for bit: shared memory
/// and threads write each range's sum into its owner's tensor alone, Gloo and MPI between
/// two ranks send each only what it needs (Sum, Product); Gloo, MPI and NCCL with more
/// ranks, and groups across hosts, all-reduce (their reduce-scatters order the sums of
/// three or more ranks otherwise).
void reduce_to_owners(at::Tensor& tensor, std::vector<OwnedRange> ranges, ReduceOp op = ReduceOp::Sum,
                      const ProcessGroup& group = ProcessGroup());
Work reduce_to_owners_async(at::Tensor tensor, std::vector<OwnedRange> ranges, ReduceOp op = ReduceOp::Sum,
                            const ProcessGroup& group = ProcessGroup());

/// An uninitialised tensor whose all_reduce needs no staging copies: between ranks of one
/// host it lives in shared memory that every local rank maps, so each rank reduces its
/// slice of all ranks' tensors in place (DistributedDataParallel's buckets are made this
/// way). Every rank of the group calls it, in order, with the same sizes and dtype; pass
/// such tensors to a collective on every rank or on none. Elsewhere, an ordinary tensor.
at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, const ProcessGroup& group = ProcessGroup());

/// Returns once every rank has called it.
void barrier(const ProcessGroup& group = ProcessGroup());
Work barrier_async(const ProcessGroup& group = ProcessGroup());

}  // namespace lockstep
