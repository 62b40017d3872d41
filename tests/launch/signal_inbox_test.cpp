#include "launch/signal_inbox.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace lockstep::launch {
namespace {

// The inbox can be readable for a process-wide signal that the earlier thread then takes
// before it is read: its handler passes it on, and it is readable again (the launcher's
// loop reads until next() says none is waiting, and polls again).
int next_signal_within_five_seconds(SignalInbox& inbox) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto now = std::chrono::steady_clock::now(); now < deadline; now = std::chrono::steady_clock::now()) {
    pollfd ready{inbox.fd(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    if (poll(&ready, 1, static_cast<int>(left) + 1) == 1) {
      if (const auto signal = inbox.next()) return *signal;
    }
  }
  return 0;
}

// A thread started before the inbox has the signals unblocked (libtorch 2.x starts such
// threads while `lockstep train` prepares), so the kernel may hand a process-wide signal to
// it. The signal still reaches the inbox: SIGTERM does not end the process, and a child's
// exit is not lost.
TEST(SignalInbox, SignalsThatAnEarlierThreadTakesStillArrive) {
  std::atomic<bool> done{false};
  std::thread earlier([&] {
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  {
    SignalInbox inbox;  // blocks the signals in this thread only: the earlier one takes them
    kill(getpid(), SIGTERM);
    EXPECT_EQ(next_signal_within_five_seconds(inbox), SIGTERM);
    const pid_t child = fork();
    if (child == 0) _exit(0);
    EXPECT_EQ(next_signal_within_five_seconds(inbox), SIGCHLD);
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status));
  }
  done = true;
  earlier.join();
}

}  // namespace
}  // namespace lockstep::launch
