#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/types.h"
#include "lockstep/comm/work.h"

// Collectives on the process group made by init(). Tensors must be contiguous CPU tensors
// of float32, float64, float16, bfloat16, int32, int64 or uint8, and every rank must call
// the same collectives in the same order with the same shapes and dtypes.
namespace lockstep {

/// Whether collectives carry tensors of this dtype.
bool is_supported_dtype(at::ScalarType dtype);

/// Reduces `tensor` in place across ranks.
void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::Sum);
Work all_reduce_async(at::Tensor tensor, ReduceOp op = ReduceOp::Sum);

/// Reduces many tensors in one collective per dtype (they are packed into one buffer).
void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
Work all_reduce_async(std::vector<at::Tensor> tensors, ReduceOp op = ReduceOp::Sum);

/// Copies root's tensor into every rank's tensor.
void broadcast(at::Tensor& tensor, int root = 0);
Work broadcast_async(at::Tensor tensor, int root = 0);

/// Broadcasts many tensors in one collective per dtype (they are packed into one buffer).
void broadcast(std::vector<at::Tensor>& tensors, int root = 0);
Work broadcast_async(std::vector<at::Tensor> tensors, int root = 0);

/// Reduces into root's tensor; other ranks' tensors are left unchanged.
void reduce(at::Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::Sum);
Work reduce_async(at::Tensor tensor, int root = 0, ReduceOp op = ReduceOp::Sum);

/// Every rank's tensor, in rank order.
std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
Work all_gather_async(at::Tensor tensor);

/// Reduces `input` across ranks and returns this rank's slice of it along dimension 0,
/// whose size must be divisible by the world size.
at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op = ReduceOp::Sum);
Work reduce_scatter_async(at::Tensor input, ReduceOp op = ReduceOp::Sum);

/// Returns once every rank has called it.
void barrier();
Work barrier_async();

}  // namespace lockstep
