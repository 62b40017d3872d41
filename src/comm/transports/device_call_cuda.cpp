// Collectives on CUDA tensors (the contract is in comm/transports/device_call.h), as PyTorch's process
// groups do them. The caller's thread records how far its current stream has got; in the
// call's turn, either the device transport's own stream (NCCL) waits for that point and the
// transport moves the device tensors there, or a side stream waits for it, copies the
// tensors to pinned host memory, and copies the host results back once the host transport
// is done. The waiter's current stream then waits for that stream. Nothing synchronizes the
// device, and the caching allocator is told every stream that uses a tensor.
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include "comm/transports/cuda_capture.h"
#include "comm/transports/device_call.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

// `tensor`'s memory is not handed out again before the work queued on `stream` so far is done.
void used_on(const at::Tensor& tensor, const c10::cuda::CUDAStream& stream) {
  c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream);
}

// CUDA events kept per device for reuse: creating and destroying the two or three a call
// records costs about as much as the rest of a small call (PyTorch keeps them too, in its
// CUDAEventCache). An event goes back once its call is destroyed, after every wait and
// query of it. The pool is never freed: destroying events as the process exits, after CUDA
// may have shut down, is not safe.
class EventPool {
 public:
  using Lease = std::unique_ptr<at::cuda::CUDAEvent, void (*)(at::cuda::CUDAEvent*)>;

  static Lease take(c10::DeviceIndex device) {
    EventPool& pool = instance();
    std::lock_guard<std::mutex> lock(pool.mutex_);
    auto& free = pool.free_[device];
    if (free.empty()) return Lease(new at::cuda::CUDAEvent(), give_back);
    at::cuda::CUDAEvent* event = free.back();
    free.pop_back();
    return Lease(event, give_back);
  }

 private:
  static EventPool& instance() {
    static auto* pool = new EventPool();
    return *pool;
  }

  static void give_back(at::cuda::CUDAEvent* event) {
    if (!event->isCreated()) {  // never recorded: bound to no device yet
      delete event;
      return;
    }
    EventPool& pool = instance();
    std::lock_guard<std::mutex> lock(pool.mutex_);
    pool.free_[event->device_index()].push_back(event);
  }

  std::mutex mutex_;
  std::map<c10::DeviceIndex, std::vector<at::cuda::CUDAEvent*>> free_;
};

class CudaDeviceCall : public DeviceCall {
 public:
  CudaDeviceCall(std::vector<at::Tensor> tensors, Collective kind, bool timed)
      : kind_(kind),
        timed_(timed),
        device_(tensors.front().device()),
        tensors_(std::move(tensors)),
        caller_stream_(c10::cuda::getCurrentCUDAStream(device_.index())),
        captured_(is_capturing(caller_stream_)),
        queued_(EventPool::take(device_.index())),
        done_(EventPool::take(device_.index())) {
    c10::cuda::CUDAGuard on_device(device_);
    queued_->record(caller_stream_);  // the tensors' producers
  }

  std::vector<at::Tensor> run(DeviceTransport* device, HostTransport& host, const Body& body) override {
    c10::cuda::CUDAGuard on_device(device_);
    if (captured_ && device && !device->connected(device_)) {
      throw CallRefused("lockstep::" + to_string(kind_) + ": the current stream of " + device_.str() +
                        " is capturing a "
                        "CUDA graph, and this is the group's first collective on " +
                        device_.str() +
                        ", whose setup "
                        "cannot be captured; call one collective on the group before capturing (docs/GPU.md)");
    }
    if (const auto stream = device ? device->device_stream(device_) : std::nullopt) {
      return run_on(c10::cuda::CUDAStream(*stream), *device, body);
    }
    if (captured_) {
      throw CallRefused(
          "lockstep::" + to_string(kind_) + ": the current stream of " + device_.str() +
          " is capturing a "
          "CUDA graph, but this group stages " +
          device_.str() +
          "'s tensors through host memory, whose "
          "copies and waits cannot be captured; capture collectives only where NCCL moves them (docs/GPU.md)");
    }
    return run_through_host(host, body);
  }

  void order_current_stream() override { done_->block(c10::cuda::getCurrentCUDAStream(device_.index())); }

  bool device_work_pending() override {
    if (!on_transport_stream_ || captured_) return false;
    // The asking thread (the watchdog's) on this call's device first: its first CUDA call
    // would otherwise make a context on GPU 0, in every rank (as ProcessGroupNCCL's does).
    c10::cuda::CUDAGuard on_device(device_);
    RelaxedCapture relaxed;
    return !done_->query();
  }

  StreamSpan device_span() const override { return {device_.str(), started_, ended_}; }

 private:
  // The device transport moves the device tensors on its stream.
  std::vector<at::Tensor> run_on(const c10::cuda::CUDAStream& stream, Transport& transport, const Body& body) {
    queued_->block(stream);
    if (timed_) started_ = mark_stream(stream.unwrap());
    c10::cuda::CUDAStreamGuard on_stream(stream);
    std::vector<at::Tensor> tensors = tensors_;
    std::vector<at::Tensor> outputs = body(transport, tensors);
    // The caller may drop its tensors when the call returns; new outputs are allocated on
    // this stream but used on the caller's.
    for (const auto& tensor : tensors_) used_on(tensor, stream);
    for (const auto& output : outputs) {
      if (!is_one_of_the_tensors(output)) used_on(output, caller_stream_);
    }
    done_->record(stream);
    if (timed_) ended_ = mark_stream(stream.unwrap());
    on_transport_stream_ = true;
    return outputs;
  }

  // The host transport moves pinned host copies; the results are copied back.
  std::vector<at::Tensor> run_through_host(HostTransport& transport, const Body& body) {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
    queued_->block(side);
    if (timed_) started_ = mark_stream(side.unwrap());
    c10::cuda::CUDAStreamGuard on_side(side);
    std::vector<at::Tensor> host;
    for (const auto& tensor : tensors_) {
      host.push_back(at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true)));
      host.back().copy_(tensor, /*non_blocking=*/true);
      used_on(tensor, side);
    }
    const EventPool::Lease copied_out = EventPool::take(device_.index());
    copied_out->record(side);
    copied_out->synchronize();  // this thread only: the caller's returned long ago

    std::vector<at::Tensor> moved = host;  // the body may move its tensors into its results
    const std::vector<at::Tensor> results = body(transport, moved);
    std::vector<at::Tensor> outputs;
    for (const auto& result : results) {
      at::Tensor target = device_tensor_of(host, result);
      if (target.defined()) {
        used_on(target, side);
      } else {
        target = at::empty(result.sizes(), result.options().device(device_));
        used_on(target, caller_stream_);
      }
      target.copy_(result, /*non_blocking=*/true);
      if (result.is_pinned()) keep_until_copied(result, side);
      outputs.push_back(target);
    }
    done_->record(side);
    if (timed_) ended_ = mark_stream(side.unwrap());
    return outputs;
  }

  bool is_one_of_the_tensors(const at::Tensor& output) const {
    for (const auto& tensor : tensors_) {
      if (output.storage().is_alias_of(tensor.storage())) return true;
    }
    return false;
  }

  // The device tensor whose host copy `result` is (a result written in place); undefined
  // for a new result.
  at::Tensor device_tensor_of(const std::vector<at::Tensor>& host, const at::Tensor& result) const {
    for (size_t i = 0; i < host.size(); ++i) {
      if (result.is_same(host[i])) return tensors_[i];
    }
    return {};
  }

  // A pinned block returns to the host allocator's pool when its tensor dies, but is handed
  // out again only once the copies recorded on it are done. (Pageable results, which the
  // pool does not own, are copied before copy_ returns.)
  static void keep_until_copied(const at::Tensor& host, const c10::cuda::CUDAStream& stream) {
    const auto& data = host.storage().data_ptr();
    at::cuda::CachingHostAllocator_recordEvent(data.get(), data.get_context(), stream);
  }

  Collective kind_;
  bool timed_;
  at::Device device_;
  std::vector<at::Tensor> tensors_;
  c10::cuda::CUDAStream caller_stream_;
  bool captured_;  // the caller's stream is capturing a CUDA graph
  EventPool::Lease queued_;
  EventPool::Lease done_;
  bool on_transport_stream_ = false;
  std::shared_ptr<StreamMark> started_, ended_;  // when timed_
};

}  // namespace

std::shared_ptr<DeviceCall> begin_device_call(const std::vector<at::Tensor>& tensors, Collective kind, bool timed) {
  if (tensors.empty() || tensors.front().device().is_cpu()) return nullptr;
  if (!tensors.front().is_cuda()) {
    throw Error("lockstep::" + to_string(kind) + ": the tensor is on " + tensors.front().device().str() +
                "; lockstep's collectives take CPU and CUDA tensors");
  }
  return std::make_shared<CudaDeviceCall>(tensors, kind, timed);
}

bool built_with_cuda() { return true; }

void use_cuda_device(int index) {
  const int gpus = c10::cuda::device_count();
  if (index < 0 || index >= gpus) {
    throw ConfigError("lockstep::init: InitOptions::device(" + std::to_string(index) + "), but " +
                      std::to_string(gpus) + " CUDA devices are visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
}

void prefer_cuda_device(int index) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  c10::cuda::MaybeSetDevice(static_cast<c10::DeviceIndex>(index));  // the context waits for first use
#else
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));  // c10 before 2.1 has no lazy form
#endif
}

int visible_cuda_devices() { return c10::cuda::device_count(); }

}  // namespace lockstep
