#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/heartbeat_monitor.h"
#include "launch/prefixed_lines.h"
#include "launch/signal_inbox.h"
#include "launch/terminal_output.h"
#include "launch/worker_process.h"

namespace lockstep::launch {

/// The workers one launcher started, watched until all have ended. Forwards their output
/// line by line under "[rank R] ", and stops them all (the stop signal, then SIGKILL after
/// `stop_timeout`) as soon as one fails or the launcher is asked to stop. Every wait is bounded
/// once stopping has begun. SIGUSR1 is passed on to the workers, which keep running. With
/// `progress_bar` (the launcher's stdout is a terminal), rank 0's bar updates ("TEXT\r") are
/// shown as one bar redrawn in place below the lines.
class WorkerGroup {
 public:
  WorkerGroup(std::chrono::milliseconds stop_timeout, bool progress_bar);
  ~WorkerGroup();

  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Takes over a started worker (its pipes included) that has global rank `rank`; in live
  /// recovery, its `incarnation`-th start.
  void add(int rank, const WorkerProcess& process, int incarnation = 0);

  /// Live recovery (--recovery live): every worker that ends is told to `ended` (the
  /// evidence the others regroup on, elastic/membership.h); one that failed does not stop
  /// the others, and is started again through `replace` while it gives a process (the
  /// restarts left); one that hangs is ended with SIGKILL, alone. The job's status is then
  /// 0 when a worker completed, else the last failure's.
  struct Started {
    WorkerProcess process;
    int incarnation;
  };
  struct LiveRecovery {
    std::function<void(int rank, int incarnation)> ended;
    std::function<std::optional<Started>(int rank)> replace;
  };
  void recover_live(LiveRecovery live);

  /// Treats a worker whose heartbeats stop as failed (exit status kHungStatus).
  void watch(std::unique_ptr<HeartbeatMonitor> heartbeats);
  /// Asks `elsewhere` twice a second whether the job failed elsewhere (another node); when
  /// it returns a cause, stops the workers as for a failure of one of them (exit status 1).
  void stop_when(std::function<std::optional<std::string>()> elsewhere);
  /// The launcher's exit status when a worker hung, as timeout(1) uses.
  static constexpr int kHungStatus = 124;

  /// Stops the workers added so far because the job cannot go on: reports `cause` (e.g.
  /// "rank 2: cannot run 'x': ..."), sends SIGTERM, and makes supervise() return `exit_status`.
  void abandon(int exit_status, const std::string& cause);

  /// Returns once every worker has ended (or ignored SIGKILL): 0 when all exited 0, otherwise
  /// the status of the first failure (128 + signal for a killed worker or a stopped launcher).
  /// Asked to stop, when every worker exited with EX_TEMPFAIL (75: it saved its state, as
  /// lockstep train does when preempted), the launcher does too.
  int supervise(SignalInbox& signals);

  /// Why the workers were stopped, when a worker failed (not when the launcher was asked to
  /// stop): "rank 1 (pid 4242) was killed by signal 9 (Killed)".
  const std::optional<std::string>& failure() const { return failure_; }

 private:
  struct Worker {
    int rank;
    int incarnation;
    pid_t pid;
    int stdout_fd;
    int stderr_fd;
    PrefixedLines stdout_lines;
    PrefixedLines stderr_lines;
    bool running = true;
    bool ended_as_hung = false;  // live recovery sent it SIGKILL
  };
  using Clock = std::chrono::steady_clock;

  void report(const std::string& line);
  void reap_exited_workers();
  void check_watchers();
  void on_worker_ended(Worker& worker, int wait_status);
  // Live recovery's part of on_worker_ended; false where it leaves the end to it.
  bool go_on_without(Worker& worker, int wait_status);
  void start_replacements();
  void on_stop_signal(int signal);
  void begin_stop(int exit_status, int signal, const std::string& cause, bool cause_is_a_worker);
  void on_deadline();
  void signal_running(int signal);
  std::vector<Worker*> running_workers();

  std::chrono::milliseconds stop_timeout_;
  bool progress_bar_;
  TerminalOutput terminal_;  // before workers_, whose lines write through it
  std::vector<Worker> workers_;
  std::optional<int> exit_status_;  // set once stopping has begun
  std::optional<Clock::time_point> deadline_;
  bool kill_sent_ = false;
  bool gave_up_ = false;
  bool stopped_by_signal_ = false;
  std::optional<std::string> failure_;
  std::unique_ptr<HeartbeatMonitor> heartbeats_;
  std::function<std::optional<std::string>()> elsewhere_;
  bool every_worker_saved_its_state_ = true;  // each exited with EX_TEMPFAIL
  std::optional<LiveRecovery> live_;
  std::vector<int> to_replace_;  // ranks of failed workers, in live recovery
  bool a_worker_completed_ = false;
  std::optional<int> last_failure_status_;
};

}  // namespace lockstep::launch
