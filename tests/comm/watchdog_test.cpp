// The watchdog ending a job over device work, on the CPU: a device transport whose queued
// work never finishes and that finds an error on its own, as NCCL's does when a peer dies.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include <torch/torch.h>

#include "comm/groups/watchdog.h"
#include "comm/transports/self_transport.h"

namespace lockstep {
namespace {

// Its abort lets the calls waiting on the device return, as ncclCommAbort does, and takes
// a while to come back itself.
class FailingDevice : public DeviceTransport {
 public:
  explicit FailingDevice(std::promise<void>& aborted) : aborted_(aborted) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "failing"; }
  void all_reduce(at::Tensor&, ReduceOp, uint32_t) override {}
  void broadcast(at::Tensor&, int, uint32_t) override {}
  void reduce(at::Tensor&, int, ReduceOp, uint32_t) override {}
  void all_gather(const at::Tensor&, at::Tensor&, uint32_t) override {}
  std::optional<c10::Stream> device_stream(at::Device) override { return std::nullopt; }
  bool connected(at::Device) override { return true; }
  std::string device_error() override { return "the device failed"; }
  void abort() override {
    aborted_.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  void leave_gracefully() override {}

 private:
  std::promise<void>& aborted_;
};

class PendingForever : public DeviceCall {
 public:
  std::vector<at::Tensor> run(DeviceTransport*, HostTransport&, const Body&) override { return {}; }
  void order_current_stream() override {}
  bool device_work_pending() override { return true; }
};

// The thread whose call the abort released goes on to exit with a status of its own (a
// main that returns): the job still ends with the watchdog's status and message.
void exit_with_seven_as_the_watchdog_ends_the_job() {
  SelfTransport host;
  std::promise<void> aborted;
  DeviceTransports devices;
  devices[at::kCUDA] = std::make_unique<FailingDevice>(aborted);
  Watchdog watchdog(0, std::chrono::seconds(60), host, devices, [] { return std::nullopt; });
  watchdog.watch_device_work(Call(Collective::AllReduce, {torch::ones({4})}), std::make_shared<PendingForever>());
  aborted.get_future().wait();
  std::exit(7);
}

TEST(Watchdog, ThreadsItsAbortReleasesDoNotEndTheJobWithAStatusOfTheirOwn) {
  EXPECT_EXIT(
      exit_with_seven_as_the_watchdog_ends_the_job(), ::testing::ExitedWithCode(1),
      "rank 0: all_reduce #0 \\(float32\\[4\\], Sum\\) failed on the device: the device failed. Ending the job.");
}

}  // namespace
}  // namespace lockstep
