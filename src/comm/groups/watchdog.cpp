#include "comm/groups/watchdog.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "lockstep/error.h"

namespace lockstep {
namespace {

std::string seconds_of(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", std::chrono::duration<double>(timeout).count());
  return text;
}

std::atomic<bool> job_ending{false};

}  // namespace

void wait_if_the_job_is_ending() {
  if (!job_ending.load()) return;
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until end_job's _Exit
}

Watchdog::Watchdog(int rank, std::chrono::milliseconds timeout, HostTransport& host, const DeviceTransports& devices,
                   Running running)
    : rank_(rank), timeout_(timeout), host_(host), devices_(devices), running_(std::move(running)) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch_host_calls() {
  std::lock_guard<std::mutex> lock(mutex_);
  host_calls_ = true;
  start();
}

void Watchdog::watch_device_work(const Call& call, std::shared_ptr<DeviceCall> device_call) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!device_work_.empty() && !device_work_.front().device_call->device_work_pending()) device_work_.pop_front();
  device_work_.push_back({call, std::chrono::steady_clock::now(), std::move(device_call)});
  start();
}

void Watchdog::start() {
  if (thread_.joinable()) return;
  // A main() that returns while a watchdog ends the job must not exit with its own status.
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(wait_if_the_job_is_ending); });
  thread_ = std::thread([this] { watch(); });
}

// The work it watches cannot be cancelled: ending the job is the only way not to hang forever.
void Watchdog::watch() {
  const auto period =
      std::min<std::chrono::milliseconds>(timeout_ / 10 + std::chrono::milliseconds(1), std::chrono::seconds(1));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, period, [&] { return stopping_; })) {
    if (host_calls_) check_host_call();
    check_device_work();
  }
}

void Watchdog::check_host_call() {
  const auto now_running = running_();
  if (now_running && now_running->second >= timeout_) {
    end_job(now_running->first + " did not complete within " + seconds_of(timeout_) +
            " s: a rank died, hangs, or "
            "called a different collective");
  }
}

void Watchdog::check_device_work() {
  std::string error;
  try {
    while (!device_work_.empty() && !device_work_.front().device_call->device_work_pending()) device_work_.pop_front();
    if (device_work_.empty()) return;
    error = device_error();
  } catch (const std::exception& e) {  // the device itself failed (CUDA's errors are sticky)
    error = e.what();
  }
  const DeviceWork& oldest = device_work_.front();
  if (!error.empty()) end_job(oldest.call.describe() + " failed on the device: " + error);
  const auto elapsed = std::chrono::steady_clock::now() - oldest.queued;
  if (elapsed < timeout_) return;
  // Without an exchange before every call, this is where differing calls are named: the host
  // transport hears, where it can (a store), what the other ranks' watchdogs report.
  const std::string late = "did not finish on the device within " + seconds_of(timeout_) + " s";
  if (const auto explained = host_.explain_device_failure(oldest.call, TimeoutError(late), elapsed, timeout_)) {
    try {
      std::rethrow_exception(explained);
    } catch (const std::exception& e) {
      end_job(std::string(e.what()) + "\n(LOCKSTEP_DEBUG=detail compares every call before it runs)");
    }
  }
  end_job(oldest.call.describe() + " " + late +
          ": a rank died, hangs, or called a different collective "
          "(LOCKSTEP_DEBUG=detail compares every call before it runs)");
}

std::string Watchdog::device_error() {
  for (const auto& [type, device] : devices_) {
    const std::string error = device->device_error();
    if (!error.empty()) return error;
  }
  return "";
}

void Watchdog::end_job(const std::string& why) {
  if (why.rfind("lockstep: ", 0) == 0) {  // a transport's explanation, which names the rank itself
    std::fprintf(stderr, "%s\nEnding the job.\n", why.c_str());
  } else {
    std::fprintf(stderr, "lockstep: rank %d: %s. Ending the job.\n", rank_, why.c_str());
  }
  std::fflush(stderr);
  // Aborting lets the calls waiting on the device return, failed: their threads must not
  // race this exit with an error or a status of their own. Each abort is bounded.
  job_ending = true;
  for (const auto& [type, device] : devices_) device->abort();  // no kernel is left spinning on a GPU
  std::_Exit(EXIT_FAILURE);
}

}  // namespace lockstep
