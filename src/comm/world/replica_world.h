#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/transports/thread_transport.h"
#include "comm/world/world.h"

namespace lockstep {

/// What the replicas of one run_replicas() call share: where each of their groups meets,
/// a board for small exchanges, and how each replica ended, so that the others stop waiting
/// for one that failed or returned.
class ReplicaSet {
 public:
  ReplicaSet(int size, std::chrono::milliseconds timeout);

  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// The meeting place of the group `name` of `members` ranks: the first member to ask
  /// makes it, the last one to ask takes it off the list.
  std::shared_ptr<ThreadMeetingPlace> place(const std::string& name, int members);
  /// Small strings from every replica, indexed by replica; every replica calls it with `key`.
  std::vector<std::string> gather(const std::string& key, int replica, const std::string& mine);

  /// Marks `replica` as failed (true for the first one to fail) or returned.
  bool fail(int replica);
  void finish(int replica);
  /// "failed" or "returned from its body" for a replica that will never call again, else "".
  std::string absence(int replica) const;
  /// The first replica that failed, or -1.
  int first_failed() const { return first_failed_.load(); }

 private:
  struct PostedValues {
    std::vector<std::string> values;
    int arrived = 0;
    int taken = 0;
  };
  struct Meeting {
    std::shared_ptr<ThreadMeetingPlace> place;
    int taken = 0;
  };
  /// Throws naming the first replica (other than `me`) that will never arrive.
  void check_everyone_can_come(int me) const;

  const int size_;
  const std::chrono::milliseconds timeout_;
  enum class Status { Running, Failed, Returned };
  std::unique_ptr<std::atomic<Status>[]> status_;
  std::atomic<int> first_failed_{-1};
  std::mutex mutex_;  // guards the maps
  std::condition_variable posted_;
  std::map<std::string, PostedValues> posted_values_;
  std::map<std::string, Meeting> places_;
};

/// The world of one replica: every rank is a thread of this process, so every group's
/// "host backend" is a ThreadTransport and all ranks share one host.
class ReplicaWorld : public World {
 public:
  ReplicaWorld(std::shared_ptr<ReplicaSet> replicas, int rank, bool debug);

  std::vector<std::string> gather(const std::string& key, const std::string& mine) override;
  std::unique_ptr<HostTransport> connect_backend(const std::vector<int>& ranks, const std::string& name) override;

 private:
  std::shared_ptr<ReplicaSet> replicas_;
};

}  // namespace lockstep
