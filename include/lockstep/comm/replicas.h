#pragma once

#include <chrono>
#include <functional>

#include <torch/arg.h>

#include "lockstep/error.h"
#include "lockstep/comm/process_group.h"

namespace lockstep {

struct ReplicaOptions {
  /// Intra-op threads of each replica; 0 gives each an equal share of this process's
  /// at::get_num_threads(), at least one.
  TORCH_ARG(int, threads) = 0;
  /// Bounds every collective of the replicas' groups, as InitOptions::timeout does.
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::seconds(300);
  /// Checks before every collective that all replicas pass the same shapes and dtypes.
  TORCH_ARG(bool, debug) = false;
  /// Pins replica i's thread (and the threads it starts) to a physical core of its own
  /// within this process's affinity, when there are at least n; else leaves them unpinned.
  /// Off by default: a library should not move its caller's threads unasked.
  TORCH_ARG(bool, bind_cores) = false;
};

/// Runs `body` on `n` threads of this process at once, the replicas of one training: each
/// gets its rank in a group of `n` whose collectives reduce through this process's memory
/// (no sockets, store or shared-memory files). On a replica's thread that group is the
/// default one, so rank(), world_size(), DistributedDataParallel, synchronize, samplers and
/// Trainer work as in a process of an init() world of `n` ranks; init() is not called.
///
/// Each replica starts with the caller's grad mode (and the rest of ATen's thread-local
/// state), its share of the intra-op threads, and its own random stream (see
/// with_replica_generator). Returns when every replica has returned. When one throws, the
/// others' collectives fail at once, and run_replicas throws ReplicaError naming the first
/// replica that failed and its error.
void run_replicas(int n, const std::function<void(ProcessGroup group)>& body,
                  const ReplicaOptions& options = ReplicaOptions());

/// The error of the replica that failed first, by run_replicas.
class ReplicaError : public Error {
 public:
  ReplicaError(int replica, const std::string& what);
  int replica() const { return replica_; }
  /// What the replica threw, without the replica's number.
  const std::string& reason() const { return reason_; }

 private:
  int replica_;
  std::string reason_;
};

/// libtorch draws from one default CPU generator per process, so replicas drawing from it
/// (module initialisation, torch::rand, dropout) would take turns on one stream, in
/// whatever order their threads run. On a replica, runs `body` with the default generator
/// drawing from the replica's own stream: it starts as a fresh process's does, manual_seed
/// inside seeds it alone, and it carries on from one call to the next. Replicas take turns
/// through such sections. Elsewhere it simply runs `body`.
void with_replica_generator(const std::function<void()>& body);

}  // namespace lockstep
