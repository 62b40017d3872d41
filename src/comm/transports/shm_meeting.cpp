#include "comm/transports/shm_meeting.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "comm/transports/transport.h"
#include "job/cpu_topology.h"

namespace lockstep {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Spinning pays while the other rank is a few microseconds away on another core; yielding,
// while it is runnable but needs this core; beyond that, sleeping frees the core for real
// work. Measured both ways (docs/PERFORMANCE.md): yielding after 64 pauses made a 4 KB
// all_reduce between ranks the scheduler put on one core 3 µs instead of 23, but the
// perceptron example's 2-worker epochs slower (0.56 s against 0.22-0.41 s).
constexpr microseconds kSpinFor{20};
constexpr microseconds kYieldUntil{200};
constexpr milliseconds kSleepAtMost{20};
constexpr milliseconds kCheckLivenessEvery{100};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Not FUTEX_PRIVATE: the word is shared between processes.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, milliseconds at_most) {
  timespec timeout{0, static_cast<long>(std::chrono::nanoseconds(at_most).count())};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// A killed rank stays a zombie until its parent reaps it; it is dead all the same.
bool is_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: trust kill()
  const auto end_of_name = line.rfind(')');
  const char state = end_of_name + 2 < line.size() ? line[end_of_name + 2] : 'R';
  return state != 'Z' && state != 'X';
}

}  // namespace

size_t ShmMeeting::bytes(int size) { return sizeof(Bell) + sizeof(Seat) * size; }

ShmMeeting::ShmMeeting(void* memory, int rank, int size, std::vector<int> group_ranks, Absence absence)
    : bell_(static_cast<Bell*>(memory)),
      seats_(reinterpret_cast<Seat*>(static_cast<char*>(memory) + sizeof(Bell))),
      rank_(rank),
      size_(size),
      group_ranks_(std::move(group_ranks)),
      absence_(std::move(absence)) {
  seats_[rank_].pid.store(getpid());
}

void ShmMeeting::meet(uint64_t phase, uint32_t tag, Deadline& deadline) {
  Seat& mine = seats_[rank_];
  mine.tags[phase & 1].store(tag, std::memory_order_relaxed);
  const int here = sched_getcpu();
  mine.cpu.store(here + 1, std::memory_order_relaxed);
  // seq_cst store then seq_cst load: either a sleeper sees this phase, or this sees it asleep.
  mine.phase.store(phase, std::memory_order_seq_cst);
  if (bell_->sleepers.load(std::memory_order_seq_cst) != 0) {
    bell_->rings.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&bell_->rings);
  }
  if (!everyone_at(phase)) {
    const auto start = Clock::now();
    const bool spin = !awaited_rank_shares_core(here, phase);
    for (int i = 1;; ++i) {
      cpu_relax();
      if (everyone_at(phase)) break;
      if (spin && i % 64 != 0) continue;
      const auto waited = Clock::now() - start;
      if (spin && waited < kSpinFor) continue;
      if (waited < kYieldUntil) {
        sched_yield();
        continue;
      }
      sleep_until_everyone_at(phase, deadline.from(start));
      break;
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (seats_[r].tags[phase & 1].load(std::memory_order_relaxed) != tag) throw CallsDiffer();
  }
}

bool ShmMeeting::awaited_rank_shares_core(int here, uint64_t phase) const {
  if (here < 0) return false;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || seats_[r].phase.load(std::memory_order_acquire) >= phase) continue;
    const int there = seats_[r].cpu.load(std::memory_order_relaxed) - 1;
    if (there >= 0 && same_physical_core(there, here)) return true;
  }
  return false;
}

bool ShmMeeting::everyone_at(uint64_t phase) const {
  for (int r = 0; r < size_; ++r) {
    if (seats_[r].phase.load(std::memory_order_acquire) < phase) return false;
  }
  return true;
}

void ShmMeeting::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    aborted_why_ = why;
  }
  aborted_ = true;
  // Wakes the sleepers of every rank: the others find nothing changed and sleep again.
  bell_->rings.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&bell_->rings);
}

void ShmMeeting::sleep_until_everyone_at(uint64_t phase, Clock::time_point deadline) {
  auto next_check = Clock::now() + kCheckLivenessEvery;
  while (true) {
    if (aborted_) {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      throw std::runtime_error(aborted_why_);
    }
    const uint32_t rings = bell_->rings.load(std::memory_order_seq_cst);
    bell_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const bool arrived = everyone_at(phase);
    if (!arrived) futex_wait(&bell_->rings, rings, kSleepAtMost);
    bell_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (arrived || everyone_at(phase)) return;
    const auto now = Clock::now();
    if (now >= deadline || now >= next_check) {
      check_on_missing(phase, now >= deadline);
      next_check = now + kCheckLivenessEvery;
    }
  }
}

void ShmMeeting::check_on_missing(uint64_t phase, bool deadline_passed) const {
  std::ostringstream gone, missing;
  for (int r = 0; r < size_; ++r) {
    if (seats_[r].phase.load(std::memory_order_acquire) >= phase) continue;
    const pid_t pid = seats_[r].pid.load();
    const bool other_process = pid > 0 && pid != getpid();
    const std::string name =
        "rank " + std::to_string(group_ranks_.at(r)) + (other_process ? " (pid " + std::to_string(pid) + ")" : "");
    missing << (missing.tellp() > 0 ? ", " : "") << name;
    const std::string why = absence_ ? absence_(r) : other_process && !is_alive(pid) ? "died" : "";
    if (!why.empty()) gone << (gone.tellp() > 0 ? ", " : "") << name << " " << why;
  }
  const std::string where = absence_ ? "memory" : "shared memory";
  if (gone.tellp() > 0) {
    throw std::runtime_error(gone.str() + " while this rank waited for it in " + where);
  }
  if (deadline_passed) {
    throw std::runtime_error("timed out waiting in " + where + " for " + missing.str() +
                             " (it hangs, or called fewer collectives than this rank)");
  }
}

}  // namespace lockstep
