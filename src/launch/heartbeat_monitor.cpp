#include "launch/heartbeat_monitor.h"

#include "launch/store_client.h"

#include "job/heartbeat.h"

namespace lockstep::launch {

HeartbeatMonitor::HeartbeatMonitor(const std::string& host, int port, int restart_count, std::vector<int> ranks,
                                   std::chrono::milliseconds timeout)
    : restart_count_(restart_count), ranks_(std::move(ranks)), timeout_(timeout) {
  store_ = connect_store_client(host, port, std::chrono::seconds(10));
}

// c10d's client can end the process from its destructor when its server has gone (node 0
// ended, which this launcher cannot know beforehand): it is left to the end of the process.
HeartbeatMonitor::~HeartbeatMonitor() { (void)store_.release(); }

std::optional<int> HeartbeatMonitor::hung() {
  const auto now = Clock::now();
  for (int rank : ranks_) {
    const auto incarnation = incarnations_.find(rank);
    const int64_t count = store_->add(
        heartbeat_key(restart_count_, rank, incarnation == incarnations_.end() ? 0 : incarnation->second), 0);
    Seen& seen = seen_[rank];
    if (count != seen.count) {
      seen = {count, now};
    } else if (count > 0 && now - seen.changed > timeout_) {
      return rank;
    }
  }
  return std::nullopt;
}

void HeartbeatMonitor::restarted(int rank, int incarnation) {
  incarnations_[rank] = incarnation;
  seen_.erase(rank);
}

}  // namespace lockstep::launch
