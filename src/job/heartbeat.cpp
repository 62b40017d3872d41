#include "job/heartbeat.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "job/process_sockets.h"
#include "job/tcp_store_options.h"

namespace lockstep {

Heartbeat::Heartbeat(const std::string& host, int port, std::string key) : key_(std::move(key)) {
  store_ = with_bounded_silence([&] {
    return std::make_unique<c10d::TCPStore>(host,
                                            tcp_store_options(port, /*is_server=*/false, std::chrono::seconds(10)));
  });
  store_->add(key_, 1);  // the first beat before init() returns
  thread_ = std::thread([this] { beat(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  thread_.join();
  // c10d's client can end the process from its destructor when its server (the launcher)
  // has gone, which this worker cannot know beforehand: one client per init() is left.
  (void)store_.release();
}

void Heartbeat::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, kEvery, [this] { return stopping_; })) {
    try {
      store_->add(key_, 1);
    } catch (const std::exception&) {
      return;  // the store is gone (the launcher ended): nobody is listening any more
    }
  }
}

}  // namespace lockstep
