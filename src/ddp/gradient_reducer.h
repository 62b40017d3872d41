#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddp/device_wait_times.h"
#include "lockstep/ddp/comm_hook.h"

namespace lockstep {

/// The engine of DistributedDataParallel: hooks on every parameter copy its gradient,
/// scaled, into a bucket; a bucket whose gradients are all in is handed to the comm hook at
/// once (in bucket order, the same on every rank), so that its reduction overlaps the rest
/// of backward; at the end of backward the reduced buckets are written back into grad(), or,
/// with gradient_as_bucket_view, grad() is the parameter's view into its reduced bucket.
class GradientReducer {
 public:
  struct Options {
    int64_t first_bucket_bytes;
    int64_t bucket_bytes;
    double scale;  // applied to each gradient as it enters its bucket
    bool find_unused_parameters;
    bool gradient_as_bucket_view;  // grad() is a view into the bucket: no copy out
    int root;                      // whose observed gradient order the buckets are rebuilt in
    ProcessGroup group;
    CommHook comm_hook;
    std::function<void()> after_backward;  // e.g. broadcasting buffers
  };

  /// `names[i]` names `parameters[i]` in errors; parameters that need no gradient are skipped.
  GradientReducer(std::vector<at::Tensor> parameters, std::vector<std::string> names, Options options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// While set, backward passes only accumulate gradients locally.
  void set_accumulating(bool accumulating) { accumulating_ = accumulating; }

  /// Per bucket, its parameters' indices, in launch order.
  std::vector<std::vector<size_t>> buckets() const;
  /// How long the last finish of backward waited for its buckets, in seconds; on CUDA
  /// while the timeline records, the newest wait the device finished (DeviceWaitTimes).
  double last_wait_seconds() const { return last_wait_seconds_; }

  /// The order the buckets were rebuilt in after the first backward pass; empty before.
  std::vector<int64_t> learned_order() const { return learned_order_; }
  /// Rebuilds the buckets in `order` (a learned_order()) at once; ConfigError if it is not
  /// an order of the parameters that need gradients.
  void load_learned_order(const std::vector<int64_t>& order);

  /// ZeRO-2: from the next backward on, each parameter's reduced gradient goes to its
  /// owner (`owners[i]`, a rank of the group, or kEveryRank) alone: elsewhere its grad() is
  /// left undefined. Buckets are reduced to their owners (GradBucket::owners), of half the cap,
  /// hold gradients for one backward only: in two reduction buffers they take turns in (on
  /// the CPU, without find_unused_parameters), or in a buffer each, released once its
  /// gradients are written.
  void shard_gradients(std::vector<int> owners);
  /// What the buckets hold between backward passes, in bytes: their buffers, or the two
  /// they take turns in.
  int64_t bucket_bytes() const;

 private:
  struct Bucket {
    int64_t numel = 0;
    at::Tensor buffer;                               // undefined between backward passes when gradients are sharded
    std::vector<size_t> members;                     // parameter indices
    std::vector<at::Tensor> views;                   // into buffer, shaped like each member
    std::vector<OwnedRange> owners;                  // with sharded gradients: who needs which elements
    size_t pending = 0;                              // gradients still to come in this backward
    ReducedBucket reduced;                           // set once launched
    double launched_us = 0;                          // for the timeline
    std::shared_ptr<StreamMark> launched_on_device;  // on CUDA, while the timeline records
  };

  /// With sharded gradients on the CPU, bucket b is reduced in turn b % 2's buffer, in shared
  /// memory where the group has it: in place, as DDP's own buckets, with two buffers in all
  /// rather than one per bucket. The turn's next bucket may fill it once the bucket before
  /// it in the turn was launched (its reduction is then waited for and written out); a bucket
  /// whose gradients come earlier fills a buffer of its own and moves in at its launch, so
  /// that every rank reduces each bucket in the same place.
  struct Turn {
    at::Tensor buffer;
    int64_t holder = -1;  // the bucket in it, until written out
    size_t next = 0;      // the bucket it serves next
  };

  void build_buckets(const std::vector<size_t>& order);
  /// Whose elements a bucket of `members` holds, as reduce_to_owners takes them.
  std::vector<OwnedRange> owned_ranges(const std::vector<size_t>& members) const;
  /// The cap of every bucket but the first: half of bucket_bytes with sharded gradients.
  int64_t bucket_cap() const;
  /// Lays the bucket out over `buffer`: its members' views into it.
  void lay_out(Bucket& bucket, at::Tensor buffer);
  /// A buffer of the bucket's own.
  at::Tensor new_buffer(const Bucket& bucket);
  /// Bucket `b`'s buffer as its first gradient of a backward arrives, with sharded gradients.
  void take_buffer(size_t b);
  /// The turns' buffers, for the buckets as they are now; none where they cannot serve.
  void make_turns();
  Turn& turn_of(size_t b) { return turns_[b % turns_.size()]; }
  void enter_turn(size_t b);
  /// At bucket `b`'s launch: into its turn's buffer, if it is not there yet.
  void move_into_turn(size_t b);
  bool shards_gradients() const { return !owners_.empty(); }
  /// With sharded gradients, whether this rank gets parameter `index`'s reduced gradient.
  bool keeps(size_t index) const { return owners_[index] == kEveryRank || owners_[index] == group_rank_; }
  /// With gradient_as_bucket_view, parameter `index` can live in its bucket: the bucket has
  /// its dtype (16-bit gradients are bucketed as float32, and are copied out as before).
  bool lives_in_bucket(size_t index) const;
  /// grad() of such a parameter becomes its view, keeping the values it held.
  void move_gradient_into_bucket(size_t index);
  /// Returns what autograd should store in grad() instead of `grad`; undefined: `grad`.
  at::Tensor on_gradient(size_t index, const at::Tensor& grad);
  void begin_backward();
  void finish_backward();
  /// After an error in backward: the user's grad() tensors not yet written come back as
  /// they were, and the next backward starts afresh.
  void abandon_backward();
  /// Runs `work` in a gradient hook, abandoning backward first if it throws: autograd then
  /// runs no end-of-backward callback.
  template <typename Work>
  void with_backward_abandoned_on_error(Work&& work) {
    try {
      work();
    } catch (...) {
      abandon_backward();
      throw;
    }
  }
  void fill_missing_gradients();
  /// Bucket `b`'s reduced values into its parameters' grad(): those some rank used, where
  /// `used` (find_unused_parameters) is defined.
  void write_reduced_bucket(size_t b, const at::Tensor& used);
  void launch_ready_buckets();
  /// Backward has nothing left to compute, only reductions to wait for: from the launch of
  /// the last bucket, whose hook may reduce it on the spot.
  void start_gradient_wait();
  void rebuild_buckets_in_arrival_order();
  void rebuild_buckets(const std::vector<int64_t>& order);

  std::vector<at::Tensor> parameters_;
  std::vector<std::string> names_;
  Options options_;
  std::vector<size_t> trained_;  // indices of parameters that need gradients
  std::vector<unsigned> hook_handles_;

  int timeline_rank_ = -1;  // this rank's row in the timeline: its rank in the default group
  std::optional<DeviceWaitTimes> device_times_;
  double last_wait_seconds_ = 0;
  bool waiting_ = false;         // start_gradient_wait() was called in this backward
  bool recording_wait_ = false;  // ... and put the wait's start in the timeline
  std::chrono::steady_clock::time_point waiting_since_;
  std::vector<Bucket> buckets_;
  std::vector<Turn> turns_;                          // with sharded gradients, where buckets can take turns
  std::vector<std::pair<size_t, size_t>> location_;  // parameter -> (bucket, slot)
  // Per parameter, its grad() while backward runs: autograd, finding grad() undefined, then
  // moves the new gradient in rather than adding it (the bucket has the sum already);
  // finish_backward writes the reduced gradient into the user's tensor and puts it back.
  std::vector<at::Tensor> set_aside_;
  std::vector<char> aliased_;  // per parameter: grad() holds the bucket's alias, until written
  // Per parameter living in its bucket and unused here (find_unused_parameters): its grad()
  // before the bucket's slot was zeroed for the reduction, put back if no rank used it.
  std::vector<at::Tensor> unused_before_;
  std::vector<int> owners_;  // per parameter, with sharded gradients: the rank that gets it
  // With sharded gradients: buckets close at half the cap (bucket_cap) where the group sums
  // an element alike in any bucket.
  bool half_buckets_ = false;
  int group_rank_ = 0;
  std::vector<char> ready_;  // per parameter, in this backward
  std::vector<size_t> arrival_order_;
  std::vector<int64_t> learned_order_;  // the root's arrival order, once rebuilt
  size_t next_to_launch_ = 0;
  bool launch_deferred_ = false;  // a full bucket waits for its turn (launch_ready_buckets)
  int64_t hooked_bucket_ = -1;    // the bucket of the gradient in its hook, while it launches
  bool in_backward_ = false;
  bool accumulating_ = false;
  bool rebuilt_ = false;  // in learned_order_
};

}  // namespace lockstep
