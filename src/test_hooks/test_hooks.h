#pragma once

// What only lockstep's tests make it do, each read from the environment here and nowhere
// else, so that the library's code names a hook, not a test's variable:
//   LOCKSTEP_TEST_SLOW_RANK=R:PART:MS   rank R sleeps MS milliseconds in PART (data or
//                                       compute) of every training step: a straggler
//   LOCKSTEP_TEST_CLOCK_OFFSET_US=R:US  rank R's clock runs US microseconds ahead: a host
//                                       whose clock differs (network namespaces share one)
//   LOCKSTEP_TEST_DIE_WHEN_HEALING=M:G  live recovery's member M kills itself as it starts
//                                       to heal generation G: a second failure mid-regroup
namespace lockstep::test_hooks {

/// Sleeps where the tests asked `rank` to be slow in `part` ("data" or "compute").
void sleep_if_slowed(int rank, const char* part);

/// What the tests added to `rank`'s clock, in microseconds; 0 for every other rank.
double clock_offset_us(int rank);

/// Ends this process by SIGKILL where the tests asked `member` to die healing `generation`.
void die_if_asked_when_healing(int member, int generation);

}  // namespace lockstep::test_hooks
