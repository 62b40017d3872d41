#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "lockstep/comm/process_group.h"
#include "lockstep/comm/types.h"
#include "lockstep/ddp/comm_hook.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace lockstep {

/// How DistributedDataParallel buckets, scales and reduces gradients. Defaults are PyTorch's.
struct DDPOptions {
  /// Gradients travel in buckets of about this many megabytes (half as many under ZeRO-2,
  /// where two buckets in flight are all the gradient memory beyond a rank's share)...
  TORCH_ARG(double, bucket_cap_mb) = 25;
  /// ...except the first, kept small so that communication starts early in backward.
  TORCH_ARG(double, first_bucket_cap_mb) = 1;
  /// Avg: the gradient of the mean over all ranks' samples; Sum: their sum.
  TORCH_ARG(ReduceOp, reduce_op) = ReduceOp::Avg;
  /// When set, summed gradients are multiplied by this instead (flashlight's 1 / world size).
  TORCH_ARG(std::optional<double>, gradient_scale);
  /// Allow parameters that get no gradient in some iterations (unused branches); costs one
  /// small extra collective per iteration.
  TORCH_ARG(bool, find_unused_parameters) = false;
  /// Each parameter's grad() is a view into its bucket: backward sums into the bucket and the
  /// reduced bucket is the gradient, with no copy out and one copy of the gradients in memory
  /// instead of two; the same bits. grad() stays a view across steps: a zero_grad() that sets
  /// it undefined, or an optimizer that assigns another tensor, get it back at the next
  /// backward. Off by default, as in PyTorch (lockstep train turns it on); 16-bit parameters,
  /// bucketed as float32, are copied out as before.
  TORCH_ARG(bool, gradient_as_bucket_view) = false;
  /// Copy buffers (e.g. BatchNorm running statistics) from the root to every rank at the end
  /// of each backward, so that all ranks evaluate and save the same model.
  TORCH_ARG(bool, broadcast_buffers) = true;
  /// The rank whose parameters and buffers everyone starts from.
  TORCH_ARG(int, root) = 0;
  /// How buckets are reduced; allreduce_hook() unless set. At world 1 without it nothing is
  /// bucketed or reduced (no cost); a hook that is set runs at world 1 too, as in PyTorch.
  TORCH_ARG(CommHook, comm_hook);
  /// The ranks that train together (root is a rank in it); the default group unless set.
  TORCH_ARG(ProcessGroup, group);
};

class GradientReducer;
class OptimizerSharding;

/// Data-parallel training of any torch::nn::Module: broadcasts the module from the root at
/// construction (after checking every rank has the same parameters), then averages
/// gradients across ranks during backward, bucket by bucket as they are ready, so that
/// communication overlaps the rest of backward. When loss.backward() returns, every
/// parameter's grad() holds the reduced gradient.
class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, DDPOptions options = DDPOptions());
  template <typename M>
  explicit DistributedDataParallel(const torch::nn::ModuleHolder<M>& module, DDPOptions options = DDPOptions())
      : DistributedDataParallel(std::static_pointer_cast<torch::nn::Module>(module.ptr()), std::move(options)) {}
  /// A TorchScript module, trained in place through a ScriptedModule over its own tensors.
  explicit DistributedDataParallel(const torch::jit::Module& module, DDPOptions options = DDPOptions());
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  torch::nn::Module& module() { return *module_; }

  /// While the returned guard lives, backward passes only accumulate gradients locally
  /// (gradient accumulation); the first backward after it reduces everything accumulated.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// Copies the root's buffers to every rank now (done after each backward by default).
  void broadcast_buffers();

  /// Number of buckets and, per bucket, its parameters' indices in module().parameters().
  std::vector<std::vector<size_t>> buckets() const;
  /// How long the last backward pass waited at its end for buckets still reducing: the
  /// communication that backward did not hide (0 on a world of one). On CUDA, where the host
  /// only queues the wait, it is the device's while the timeline records, from the newest
  /// backward the device finished; otherwise the host's.
  double last_gradient_wait_seconds() const;

  /// What DDP learned in the first backward pass: the parameters' indices (as in buckets())
  /// in the order the root's gradients arrived, which the buckets were then rebuilt in;
  /// empty before. Checkpoints keep it, so that a resumed run reduces in the same buckets,
  /// and so sums every element in the same order, as a run never stopped.
  std::vector<int64_t> bucket_order() const;
  /// Rebuilds the buckets in `order` (a bucket_order() of this model, e.g. from a
  /// checkpoint) as if this run's first backward had learned it. Every rank calls it with
  /// the same order, outside backward; an order of another model throws ConfigError.
  void load_bucket_order(const std::vector<int64_t>& order);

  /// ZeRO stage 2 with `sharding` (a ShardedOptimizer of this model's parameters over this
  /// DDP's group): after each backward a rank keeps the reduced gradients of the parameters
  /// it steps, and the others' grad() is undefined; each bucket is reduced to the owners of
  /// its gradients (GradBucket::owners, reduce_to_owners); buckets hold gradients for one
  /// backward, on the CPU in two reduction buffers they take turns in. They close at half
  /// bucket_cap_mb (about one bucket_cap_mb in all) where the group sums an element alike in
  /// any bucket (one host, two ranks, two hosts), and keep DDP's buckets, so as to sum what
  /// DDP sums, where it does not (an engine over three or more ranks or hosts). Every rank
  /// calls it, outside backward. Clip with sharding.clip_grad_norm(). ConfigError for
  /// another group, or under live recovery (a partition kept on two ranks).
  void shard_gradients(const OptimizerSharding& sharding);
  /// Bytes DDP's buckets hold between backward passes: about the gradients' size, or once
  /// shard_gradients() was called the two buffers they take turns in (about two buckets).
  int64_t bucket_bytes() const;

 private:
  std::shared_ptr<torch::nn::Module> module_;
  DDPOptions options_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace lockstep
