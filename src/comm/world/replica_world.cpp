#include "comm/world/replica_world.h"

#include <algorithm>

#include "lockstep/error.h"

namespace lockstep {
namespace {

// How often a replica waiting for the others' posted values checks that the others can still come.
constexpr std::chrono::milliseconds kCheckEvery{50};

WorldSpec replica_spec(const ReplicaSet& replicas, int rank, bool debug) {
  WorldSpec spec;
  spec.backend = Backend::Threads;
  // Replicas share their process's GPUs: CUDA tensors are staged through its memory.
  spec.device_backend = DeviceBackend::Staged;
  spec.rank = rank;
  spec.world_size = replicas.size();
  spec.local_rank = rank;
  spec.local_world_size = replicas.size();
  spec.timeout = replicas.timeout();
  spec.debug = debug;
  // Groups connect through connect_backend, which is process memory here: no segments.
  spec.shared_memory = false;
  return spec;
}

}  // namespace

ReplicaSet::ReplicaSet(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), status_(new std::atomic<Status>[size]) {
  for (int r = 0; r < size; ++r) status_[r].store(Status::Running);
}

std::shared_ptr<ThreadMeetingPlace> ReplicaSet::place(const std::string& name, int members) {
  std::lock_guard<std::mutex> lock(mutex_);
  Meeting& entry = places_[name];
  if (!entry.place) entry.place = std::make_shared<ThreadMeetingPlace>(members);
  auto place = entry.place;
  if (++entry.taken == members) places_.erase(name);
  return place;
}

std::vector<std::string> ReplicaSet::gather(const std::string& key, int replica, const std::string& mine) {
  std::unique_lock<std::mutex> lock(mutex_);
  PostedValues& entry = posted_values_[key];
  if (entry.values.empty()) entry.values.resize(size_);
  entry.values[replica] = mine;
  if (++entry.arrived == size_) posted_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (entry.arrived < size_) {
    posted_.wait_for(lock, kCheckEvery);
    if (entry.arrived == size_) break;
    check_everyone_can_come(replica);
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError("lockstep: replica " + std::to_string(replica) + " timed out after " +
                         std::to_string(timeout_.count()) + " ms waiting for the other replicas at '" + key + "'");
    }
  }
  auto values = entry.values;
  if (++entry.taken == size_) posted_values_.erase(key);
  return values;
}

bool ReplicaSet::fail(int replica) {
  status_[replica].store(Status::Failed);
  int none = -1;
  const bool first = first_failed_.compare_exchange_strong(none, replica);
  posted_.notify_all();
  return first;
}

void ReplicaSet::finish(int replica) {
  status_[replica].store(Status::Returned);
  posted_.notify_all();
}

std::string ReplicaSet::absence(int replica) const {
  switch (status_[replica].load()) {
    case Status::Failed: return "failed";
    case Status::Returned: return "returned from its body";
    case Status::Running: return "";
  }
  return "";
}

void ReplicaSet::check_everyone_can_come(int me) const {
  for (int r = 0; r < size_; ++r) {
    const std::string why = r == me ? "" : absence(r);
    if (!why.empty()) {
      throw Error("lockstep: replica " + std::to_string(r) + " " + why + " while replica " + std::to_string(me) +
                  " waited for it");
    }
  }
}

ReplicaWorld::ReplicaWorld(std::shared_ptr<ReplicaSet> replicas, int rank, bool debug)
    : World(replica_spec(*replicas, rank, debug), std::vector<std::string>(replicas->size(), "this process")),
      replicas_(std::move(replicas)) {}

std::vector<std::string> ReplicaWorld::gather(const std::string& key, const std::string& mine) {
  return replicas_->gather(key, spec().rank, mine);
}

std::unique_ptr<HostTransport> ReplicaWorld::connect_backend(const std::vector<int>& ranks, const std::string& name) {
  const int rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), spec().rank) - ranks.begin());
  auto replicas = replicas_;
  // Errors name the replicas by their world rank, which is what run_replicas reports.
  auto absence = [replicas, ranks](int r) { return replicas->absence(ranks[r]); };
  return std::make_unique<ThreadTransport>(replicas_->place(name, static_cast<int>(ranks.size())), rank,
                                           static_cast<int>(ranks.size()), spec().timeout, ranks, absence);
}

}  // namespace lockstep
