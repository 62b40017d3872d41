#pragma once

// What only lockstep's tests make it do, each read from the environment here and nowhere
// else, so that the library's code names a hook, not a test's variable:
//   LOCKSTEP_TEST_SLOW_RANK=R:PART:MS   rank R sleeps MS milliseconds in PART (data or
//                                       compute) of every training step: a straggler
//   LOCKSTEP_TEST_CLOCK_OFFSET_US=R:US  rank R's clock runs US microseconds ahead: a host
//                                       whose clock differs (network namespaces share one)
namespace lockstep::test_hooks {

/// Sleeps where the tests asked `rank` to be slow in `part` ("data" or "compute").
void sleep_if_slowed(int rank, const char* part);

/// What the tests added to `rank`'s clock, in microseconds; 0 for every other rank.
double clock_offset_us(int rank);

}  // namespace lockstep::test_hooks
