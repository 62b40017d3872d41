#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "job/elastic_keys.h"

namespace c10d {
class TCPStore;
}

namespace lockstep::elastic {

/// Who trains, generation after generation, under `lockstep run --recovery live`: the
/// workers agree through the store the launchers already share (no process of its own
/// that could fail alone). A generation ends when a member's collective fails or when a
/// joiner waits; the next one holds every member of it that goes on, in their old order,
/// then the joiners. A member is left out only on evidence: its launcher saw it end
/// (ended_key); a hung one is ended by its launcher's heartbeat watch. So no two groups
/// ever form from one generation, and no one is dropped for being slow. A member's end is
/// also what aborts a collective that waits on it: each member watches for ended marks, so
/// that a node cut off (whose connections never close) costs its heartbeat timeout, not the
/// collectives' timeout. A member that loses the store (cut off from node 0, or node 0
/// gone) can join no generation: its group is aborted too, and it ends.
class Membership {
 public:
  /// This worker's, when its launcher asks for live recovery (LOCKSTEP_RECOVERY=live);
  /// nullopt otherwise. `launched_world_size` counts every worker launched, or to be
  /// (LOCKSTEP_MAX_WORKERS); the first generation holds them all, or those the launchers
  /// started the job with (--nnodes MIN:MAX: its record in the store).
  static std::unique_ptr<Membership> from_environment();
  Membership(std::string store_host, int store_port, int attempt, Member me, int launched_world_size,
             std::chrono::milliseconds timeout, int min_members = 1);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  const Member& me() const { return me_; }
  /// The fewest members the job trains on with (`-n MIN:MAX`, LOCKSTEP_MIN_WORKERS).
  int min_members() const { return min_members_; }
  /// The workers as launched that are in no generation now, as "worker 1" or "workers 1, 2".
  std::string missing() const;
  /// Not in the first generation: started again by its launcher, or on a node that came
  /// after the job started (--nnodes MIN:MAX). It joins a generation in progress.
  bool joiner() const { return joiner_; }
  int generation() const { return generation_; }
  /// The current generation's members, in rank order.
  const std::vector<Member>& members() const { return members_; }
  int rank() const;

  /// A replacement's way in: waits until a generation admits it, then that is the current
  /// one; false when the others finished the job first.
  bool wait_for_admission();
  /// Says the job's training is done, so that a replacement still waiting ends too.
  void finish() { write("finished", "1"); }
  /// Forms the next generation; every member that goes on calls it. Waits until each member
  /// of this generation has called it too or has ended; TimeoutError naming those that did
  /// neither within the timeout (a hung worker whose launcher does not watch heartbeats).
  void form_next();
  /// The members of the generation before that are not in this one.
  std::vector<Member> left() const { return left_; }
  /// Whether a joiner waits to be admitted: watched from a thread of its own, so that the
  /// step that asks costs no store round trip.
  bool joiner_waiting() const { return joiner_waiting_.load(); }

 private:
  std::string key(const std::string& name) const { return elastic_key(attempt_, name); }
  bool has(const std::string& name);
  std::string read(const std::string& name);
  void write(const std::string& name, const std::string& value);
  void adopt(int generation, const std::string& record);
  std::string compose_next();
  /// The watch thread: joiners (rank 0) and ended members (everyone), every kWatchEvery.
  void watch();
  void watch_joiners(int64_t& admitted);
  /// Aborts the default group where it is `generation`'s and one of its members ended.
  void abort_if_a_member_ended(int generation);

  std::unique_ptr<c10d::TCPStore> store_;
  std::unique_ptr<c10d::TCPStore> watch_store_;  // the joiner watch's own connection
  int attempt_;
  Member me_;
  bool joiner_ = false;
  int launched_world_size_;
  int min_members_;
  std::chrono::milliseconds timeout_;
  int generation_ = 0;
  std::vector<Member> members_;
  std::vector<Member> left_;
  std::mutex watched_mutex_;  // the generation and members the watch thread reads
  int watched_generation_ = 0;
  std::vector<Member> watched_members_;
  std::atomic<bool> joiner_waiting_{false};
  std::atomic<bool> watching_{false};  // rank 0 watches for joiners: the step's agreement tells the rest
  std::atomic<bool> stopping_{false};
  std::atomic<bool> store_lost_{false};  // the watch thread's store stopped answering
  std::mutex stop_mutex_;
  std::condition_variable stop_;
  static constexpr std::chrono::milliseconds kWatchEvery{100};
  std::thread watcher_;
};

}  // namespace lockstep::elastic
