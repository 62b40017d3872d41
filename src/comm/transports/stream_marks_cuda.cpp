// Stream marks on CUDA (the contract is in comm/transports/stream_marks.h): a timing event
// per mark, measured with cudaEventElapsedTime from an anchor event of the same device whose
// host time was read as the device passed it.
#include <cuda_runtime_api.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "comm/transports/cuda_capture.h"
#include "comm/transports/stream_marks.h"

namespace lockstep {
namespace {

double steady_now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An event whose host time is known to within the few microseconds a synchronize takes to
// return: recorded on a stream of its own, which nothing else uses, so it passes at once.
struct Anchor {
  at::cuda::CUDAEvent event{cudaEventDefault};
  double steady_us = 0;
};

// A device's newest anchor. cudaEventElapsedTime gives float milliseconds: 24 bits keep
// a microsecond for about 16 s, so marks are measured from an anchor at most 4 s older.
class Anchors {
 public:
  static std::shared_ptr<const Anchor> of(c10::DeviceIndex device) {
    static auto* anchors = new Anchors();  // never freed: used until the process ends
    return anchors->current(device);
  }

 private:
  static constexpr double kRenewAfterUs = 4e6;

  std::shared_ptr<const Anchor> current(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& anchor = anchors_[device];
    if (!anchor || steady_now_us() - anchor->steady_us > kRenewAfterUs) anchor = made_on(device);
    return anchor;
  }

  std::shared_ptr<const Anchor> made_on(c10::DeviceIndex device) {
    auto found = streams_.find(device);
    if (found == streams_.end()) {
      cudaStream_t stream = nullptr;
      C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      found = streams_.emplace(device, stream).first;
    }
    auto anchor = std::make_shared<Anchor>();
    anchor->event.record(c10::cuda::getStreamFromExternal(found->second, device));
    anchor->event.synchronize();
    anchor->steady_us = steady_now_us();
    return anchor;
  }

  std::mutex mutex_;
  std::map<c10::DeviceIndex, std::shared_ptr<const Anchor>> anchors_;
  std::map<c10::DeviceIndex, cudaStream_t> streams_;  // never destroyed, like the anchors
};

class CudaStreamMark : public StreamMark {
 public:
  explicit CudaStreamMark(const c10::cuda::CUDAStream& stream)
      : device_(stream.device_index()), anchor_(Anchors::of(device_)) {
    event_.record(stream);
  }

  std::optional<double> steady_us() override {
    asked(cudaEventQuery);
    return time_;
  }

  std::optional<double> wait_steady_us() override {
    asked(cudaEventSynchronize);
    return time_;
  }

 private:
  // Asks the event with `ask` (a query or a wait), unless it answered already. A failure
  // is the device's to report (the watchdog does): here the mark just has no time.
  void asked(cudaError_t (*ask)(cudaEvent_t)) {
    if (time_ || failed_) return;
    try {
      c10::cuda::CUDAGuard on_device(device_);  // else the asking thread's first call makes a context on GPU 0
      RelaxedCapture relaxed;
      const cudaError_t state = ask(event_.event());
      float ms = 0;
      if (state == cudaSuccess && cudaEventElapsedTime(&ms, anchor_->event.event(), event_.event()) == cudaSuccess) {
        time_ = anchor_->steady_us + 1000.0 * ms;
      } else if (state != cudaErrorNotReady) {
        failed_ = true;
        (void)cudaGetLastError();  // not left for the next CUDA call to report
      }
    } catch (const std::exception&) {
      failed_ = true;
    }
  }

  c10::DeviceIndex device_;
  std::shared_ptr<const Anchor> anchor_;
  at::cuda::CUDAEvent event_{cudaEventDefault};
  std::optional<double> time_;
  bool failed_ = false;
};

}  // namespace

std::shared_ptr<StreamMark> mark_stream(const c10::Stream& stream) {
  if (stream.device_type() != c10::DeviceType::CUDA) return nullptr;
  const c10::cuda::CUDAStream cuda(stream);
  c10::cuda::CUDAGuard on_device(cuda.device_index());
  if (is_capturing(cuda)) return nullptr;
  RelaxedCapture relaxed;  // an anchor's synchronize must not disturb another thread's capture
  return std::make_shared<CudaStreamMark>(cuda);
}

std::shared_ptr<StreamMark> mark_current_stream(at::Device device) {
  if (!device.is_cuda()) return nullptr;
  return mark_stream(c10::cuda::getCurrentCUDAStream(device.index()).unwrap());
}

}  // namespace lockstep
