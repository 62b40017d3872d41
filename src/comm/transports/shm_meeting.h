#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace lockstep {

/// `value` rounded up to a multiple of `multiple`: where what follows a meeting may start.
inline size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

/// Where the ranks of one host meet between the steps of a collective: processes at the
/// start of their shared segment, replica threads in their process's memory. It holds, per
/// rank, the last phase it reached, the tag of the call it was in and its pid, each on its
/// own cache line.
///
/// Waiting spins for a few microseconds (the other rank is usually about to arrive), then
/// yields, then sleeps on a futex, so that ranks outnumbering cores do not starve the rank
/// they wait for. It does not spin at all while a rank it waits for last ran on this
/// rank's physical core (the same CPU, or its SMT sibling): there spinning takes the very
/// cycles the other rank needs to arrive. While asleep it checks that the ranks it waits
/// for can still come.
class ShmMeeting {
 public:
  using Clock = std::chrono::steady_clock;

  /// The deadline of one call: its timeout from the moment one of its meetings first has to
  /// wait. Most meetings of small calls find everyone there, and reading the clock for each
  /// would be a measurable share of such a call.
  class Deadline {
   public:
    explicit Deadline(std::chrono::milliseconds timeout) : timeout_(timeout) {}
    /// A new call: its clock starts at its first wait.
    void restart() { started_ = false; }
    /// The deadline, starting the call's clock at `now` if it has not started.
    Clock::time_point from(Clock::time_point now) {
      if (!started_) {
        at_ = now + timeout_;
        started_ = true;
      }
      return at_;
    }

   private:
    std::chrono::milliseconds timeout_;
    bool started_ = false;
    Clock::time_point at_;
  };

  /// Why rank r will never come (e.g. "failed"), or "" while it may.
  using Absence = std::function<std::string(int r)>;

  static size_t bytes(int size);

  /// `memory` is bytes(size) zeroed bytes, 64-aligned; `group_ranks[r]` is how errors name
  /// rank r. Without `absence`, a rank is gone when its process has died.
  ShmMeeting(void* memory, int rank, int size, std::vector<int> group_ranks, Absence absence = nullptr);

  /// Marks this rank as having reached `phase` in the call tagged `tag`, then waits until
  /// every rank has. Throws CallsDiffer when their tags differ, and Error naming the ranks
  /// that died or did not come by the call's `deadline`.
  void meet(uint64_t phase, uint32_t tag, Deadline& deadline);
  /// From another thread: this rank's wait now, and every later one that has to wait,
  /// throws `why`. The others are not told (their own abort, or their deadline, ends theirs).
  void abort(const std::string& why);

 private:
  struct alignas(64) Seat {
    std::atomic<uint64_t> phase;
    // By phase parity: a rank can be one phase ahead of a rank still checking the tags of
    // the previous one, never two.
    std::atomic<uint32_t> tags[2];
    std::atomic<int32_t> pid;
    std::atomic<int32_t> cpu;  // 1 + the CPU it ran on when it last arrived; 0 unknown
  };
  struct alignas(64) Bell {
    std::atomic<uint32_t> rings;     // the futex word
    std::atomic<uint32_t> sleepers;  // ranks asleep on it: arrivals ring only when non-zero
  };

  bool everyone_at(uint64_t phase) const;
  /// Whether a rank not yet at `phase` last ran on the physical core of CPU `here`.
  bool awaited_rank_shares_core(int here, uint64_t phase) const;
  void sleep_until_everyone_at(uint64_t phase, Clock::time_point deadline);
  /// Throws naming the ranks not yet at `phase`: gone ones, or all of them after the deadline.
  void check_on_missing(uint64_t phase, bool deadline_passed) const;

  Bell* bell_;
  Seat* seats_;
  int rank_;
  int size_;
  std::vector<int> group_ranks_;
  Absence absence_;
  std::mutex abort_mutex_;
  std::string aborted_why_;  // under abort_mutex_
  std::atomic<bool> aborted_{false};
};

}  // namespace lockstep
