#include "launch/worker_group.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include <cstring>

#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

// How long workers get to vanish after SIGKILL before the launcher stops waiting for them
// (a process stuck in the kernel cannot be killed sooner).
constexpr std::chrono::seconds kKillGrace{5};
// How often heartbeats and the other nodes are checked on while the workers run.
constexpr int kWatchEveryMs = 500;

std::string describe_signal(int signal) { return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")"; }

std::string describe_worker(int rank, pid_t pid) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
}

// "the other 2 workers", "the other worker", "3 workers"
std::string count_workers(std::size_t count, bool others) {
  if (count == 1) {
    return others ? "the other worker" : "1 worker";
  }
  return (others ? "the other " : "") + std::to_string(count) + " workers";
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string list = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    list += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  return list;
}

std::string describe_seconds(std::chrono::milliseconds duration) {
  std::string text = std::to_string(duration.count() / 1000.0);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') {
    text.pop_back();
  }
  return text + " s";
}

// Forwards what `fd` holds; closes it, ending its last line, once the worker's side is closed.
void forward_stream(int& fd, PrefixedLines& lines) {
  if (fd >= 0 && !forward_available(fd, lines)) {
    lines.flush();
    close(fd);
    fd = -1;
  }
}

// For a worker that has ended: what it wrote is already in the pipe; anything a child it left
// behind writes later is not waited for.
void close_stream(int& fd, PrefixedLines& lines) {
  forward_stream(fd, lines);
  if (fd >= 0) {
    close(fd);
    fd = -1;
  }
  lines.flush();
}

}  // namespace

WorkerGroup::WorkerGroup(std::chrono::milliseconds stop_timeout, bool progress_bar)
    : stop_timeout_(stop_timeout), progress_bar_(progress_bar), terminal_(STDOUT_FILENO) {}

WorkerGroup::~WorkerGroup() {
  for (Worker& worker : workers_) {
    close_stream(worker.stdout_fd, worker.stdout_lines);
    close_stream(worker.stderr_fd, worker.stderr_lines);
  }
}

void WorkerGroup::add(int rank, const WorkerProcess& process, int incarnation) {
  std::string prefix = "[rank " + std::to_string(rank) + "] ";
  workers_.push_back(Worker{rank, incarnation, process.pid, process.stdout_fd, process.stderr_fd,
                            PrefixedLines(prefix, terminal_, STDOUT_FILENO, progress_bar_ && rank == 0),
                            PrefixedLines(prefix, terminal_, STDERR_FILENO)});
}

void WorkerGroup::report(const std::string& line) {
  terminal_.write_line(STDERR_FILENO, "lockstep run: " + line + "\n");
}

void WorkerGroup::watch(std::unique_ptr<HeartbeatMonitor> heartbeats) {
  heartbeats_ = std::move(heartbeats);
  for (const Worker& worker : workers_) {
    if (worker.incarnation != 0) heartbeats_->restarted(worker.rank, worker.incarnation);  // a node's launcher again
  }
}

void WorkerGroup::recover_live(LiveRecovery live) { live_ = std::move(live); }

void WorkerGroup::stop_when(std::function<std::optional<std::string>()> elsewhere) {
  elsewhere_ = std::move(elsewhere);
}

void WorkerGroup::check_watchers() {
  if (elsewhere_) {
    if (const auto cause = elsewhere_()) {
      failure_ = *cause;
      begin_stop(1, SIGTERM, *cause, /*cause_is_a_worker=*/false);
      return;
    }
  }
  if (!heartbeats_) return;
  std::optional<int> rank;
  try {
    rank = heartbeats_->hung();
  } catch (const std::exception&) {
    return;  // the store cannot be read just now; the workers' own timeouts still hold
  }
  for (Worker* worker : running_workers()) {
    if (rank && worker->rank == *rank && live_) {
      if (worker->ended_as_hung) continue;
      report(describe_worker(worker->rank, worker->pid) + " missed its heartbeats for " +
             describe_seconds(heartbeats_->timeout()) + ": it hangs or was stopped; ending it, the others go on");
      worker->ended_as_hung = true;
      kill(-worker->pid, SIGKILL);
    } else if (rank && worker->rank == *rank) {
      failure_ = describe_worker(worker->rank, worker->pid) + " missed its heartbeats for " +
                 describe_seconds(heartbeats_->timeout()) + ": it hangs or was stopped";
      begin_stop(kHungStatus, SIGTERM, *failure_, /*cause_is_a_worker=*/false);  // it is one of those stopped
      // A stopped worker takes no signal but SIGKILL until it runs again.
      kill(-worker->pid, SIGCONT);
    }
  }
}

void WorkerGroup::abandon(int exit_status, const std::string& cause) { begin_stop(exit_status, SIGTERM, cause, true); }

int WorkerGroup::supervise(SignalInbox& signals) {
  while (!running_workers().empty() && !gave_up_) {
    std::vector<pollfd> polled{{signals.fd(), POLLIN, 0}};
    std::vector<Worker*> polled_workers;
    for (Worker& worker : workers_) {
      if (worker.stdout_fd >= 0 || worker.stderr_fd >= 0) {
        // poll() skips negative descriptors, so a stream closed early keeps its slot.
        polled.push_back({worker.stdout_fd, POLLIN, 0});
        polled.push_back({worker.stderr_fd, POLLIN, 0});
        polled_workers.push_back(&worker);
      }
    }

    int timeout_ms = -1;  // running workers may run for days; only stopping has a deadline
    if (deadline_) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - Clock::now());
      timeout_ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, left.count()));
    } else if (heartbeats_ || elsewhere_) {
      timeout_ms = kWatchEveryMs;
    }
    poll(polled.data(), polled.size(), timeout_ms);

    for (std::size_t i = 0; i < polled_workers.size(); ++i) {
      Worker& worker = *polled_workers[i];
      if (polled[1 + 2 * i].revents != 0) {
        forward_stream(worker.stdout_fd, worker.stdout_lines);
      }
      if (polled[2 + 2 * i].revents != 0) {
        forward_stream(worker.stderr_fd, worker.stderr_lines);
      }
    }
    while (std::optional<int> signal = signals.next()) {
      if (*signal == SIGCHLD) {
        reap_exited_workers();
      } else if (*signal == SIGUSR1) {
        report("got " + describe_signal(SIGUSR1) + "; passing it on to the workers");
        signal_running(SIGUSR1);
      } else {
        on_stop_signal(*signal);
      }
    }
    if (!exit_status_) check_watchers();
    if (deadline_ && Clock::now() >= *deadline_ && !running_workers().empty()) {
      on_deadline();
    }
  }
  if (stopped_by_signal_ && every_worker_saved_its_state_) return EX_TEMPFAIL;
  if (!exit_status_ && !a_worker_completed_ && last_failure_status_) return *last_failure_status_;
  return exit_status_.value_or(0);
}

void WorkerGroup::reap_exited_workers() {
  for (Worker* worker : running_workers()) {
    int wait_status = 0;
    if (waitpid(worker->pid, &wait_status, WNOHANG) == worker->pid) {
      worker->running = false;
      close_stream(worker->stdout_fd, worker->stdout_lines);
      close_stream(worker->stderr_fd, worker->stderr_lines);
      on_worker_ended(*worker, wait_status);
    }
  }
  start_replacements();  // after the loop: adding workers moves them
}

void WorkerGroup::on_worker_ended(Worker& worker, int wait_status) {
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != EX_TEMPFAIL) every_worker_saved_its_state_ = false;
  if (exit_status_) {
    return;  // already stopping: this exit is most likely our own doing
  }
  if (live_ && go_on_without(worker, wait_status)) return;
  std::string who = describe_worker(worker.rank, worker.pid);
  if (WIFSIGNALED(wait_status)) {
    int signal = WTERMSIG(wait_status);
    begin_stop(128 + signal, SIGTERM, who + " was killed by " + describe_signal(signal), true);
  } else if (WEXITSTATUS(wait_status) != 0) {
    int status = WEXITSTATUS(wait_status);
    begin_stop(status, SIGTERM, who + " exited with status " + std::to_string(status), true);
  }
}

bool WorkerGroup::go_on_without(Worker& worker, int wait_status) {
  live_->ended(worker.rank, worker.incarnation);
  const bool signaled = WIFSIGNALED(wait_status);
  const int status = signaled ? 128 + WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
  if (status == 0) {
    a_worker_completed_ = true;
    return true;
  }
  if (status == EX_TEMPFAIL) return false;  // it saved its state and stops: so do the others
  const std::string who = describe_worker(worker.rank, worker.pid);
  report(who +
         (signaled ? " was killed by " + describe_signal(WTERMSIG(wait_status))
                   : " exited with status " + std::to_string(status)) +
         "; the others go on without it");
  last_failure_status_ = status;
  to_replace_.push_back(worker.rank);
  return true;
}

void WorkerGroup::start_replacements() {
  for (int rank : to_replace_) {
    std::optional<Started> started;
    try {
      started = live_->replace(rank);
    } catch (const std::exception& error) {  // the store's errors too
      report("cannot start rank " + std::to_string(rank) + " again: " + error.what());
    }
    if (!started) continue;
    add(rank, started->process, started->incarnation);
    if (heartbeats_) heartbeats_->restarted(rank, started->incarnation);
    report("started rank " + std::to_string(rank) + " again (pid " + std::to_string(started->process.pid) +
           ") to rejoin the others");
  }
  to_replace_.clear();
}

void WorkerGroup::on_stop_signal(int signal) {
  if (exit_status_) {
    signal_running(signal);  // asked again while stopping: pass it on, keep the deadline
    return;
  }
  stopped_by_signal_ = true;
  begin_stop(128 + signal, signal, "got " + describe_signal(signal), false);
}

void WorkerGroup::begin_stop(int exit_status, int signal, const std::string& cause, bool cause_is_a_worker) {
  if (cause_is_a_worker) failure_ = cause;
  std::size_t running = running_workers().size();
  if (running == 0) {
    report(cause);
  } else {
    report(cause + "; stopping " + count_workers(running, cause_is_a_worker));
  }
  exit_status_ = exit_status;
  deadline_ = Clock::now() + stop_timeout_;
  signal_running(signal);
}

void WorkerGroup::on_deadline() {
  std::vector<int> ranks;
  for (Worker* worker : running_workers()) {
    ranks.push_back(worker->rank);
  }
  if (kill_sent_) {
    report(list_ranks(ranks) + " still running " + describe_seconds(kKillGrace) +
           " after SIGKILL; leaving without waiting for them");
    gave_up_ = true;
    return;
  }
  report(list_ranks(ranks) + " did not stop within " + describe_seconds(stop_timeout_) + "; sending SIGKILL");
  signal_running(SIGKILL);
  kill_sent_ = true;
  deadline_ = Clock::now() + kKillGrace;
}

void WorkerGroup::signal_running(int signal) {
  for (Worker* worker : running_workers()) {
    kill(-worker->pid, signal);  // the whole group: the worker and any children it started
  }
}

std::vector<WorkerGroup::Worker*> WorkerGroup::running_workers() {
  std::vector<Worker*> running;
  for (Worker& worker : workers_) {
    if (worker.running) {
      running.push_back(&worker);
    }
  }
  return running;
}

}  // namespace lockstep::launch
