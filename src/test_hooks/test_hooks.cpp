#include "test_hooks/test_hooks.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace lockstep::test_hooks {
namespace {

struct SlowRank {
  int rank = -1;
  std::string part;
  int ms = 0;
};

SlowRank slow_rank() {
  SlowRank slow;
  const char* value = std::getenv("LOCKSTEP_TEST_SLOW_RANK");
  char part[16] = {};
  if (value == nullptr || std::sscanf(value, "%d:%15[a-z]:%d", &slow.rank, part, &slow.ms) != 3) return SlowRank();
  slow.part = part;
  return slow;
}

struct ClockOffset {
  int rank = -1;
  double us = 0;
};

ClockOffset clock_offset() {
  ClockOffset offset;
  const char* value = std::getenv("LOCKSTEP_TEST_CLOCK_OFFSET_US");
  if (value != nullptr && std::sscanf(value, "%d:%lf", &offset.rank, &offset.us) != 2) offset.rank = -1;
  return offset;
}

struct DeathWhenHealing {
  int member = -1;
  int generation = -1;
};

DeathWhenHealing death_when_healing() {
  DeathWhenHealing death;
  const char* value = std::getenv("LOCKSTEP_TEST_DIE_WHEN_HEALING");
  if (value != nullptr && std::sscanf(value, "%d:%d", &death.member, &death.generation) != 2) death = {};
  return death;
}

}  // namespace

void sleep_if_slowed(int rank, const char* part) {
  static const SlowRank slow = slow_rank();
  if (slow.ms > 0 && slow.part == part && slow.rank == rank)
    std::this_thread::sleep_for(std::chrono::milliseconds(slow.ms));
}

double clock_offset_us(int rank) {
  static const ClockOffset offset = clock_offset();
  return rank == offset.rank ? offset.us : 0;
}

void die_if_asked_when_healing(int member, int generation) {
  static const DeathWhenHealing death = death_when_healing();
  if (member == death.member && generation == death.generation) raise(SIGKILL);
}

}  // namespace lockstep::test_hooks
