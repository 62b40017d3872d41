// Host staging of CUDA tensors for the transports that move host memory (the contract is
// in comm/device_staging.h). As PyTorch's ProcessGroupGloo does for CUDA tensors: copies out
// on a side stream that first waits for the caller's current stream, the transport on the
// collective's thread once they are done, copies back on the side stream, and the waiting
// thread's current stream ordered after them. Nothing synchronizes the device.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "comm/device_staging.h"
#include "lockstep/comm/error.h"

namespace lockstep {
namespace {

class CudaHostStaging : public HostStaging {
 public:
  explicit CudaHostStaging(std::vector<at::Tensor> device_tensors)
      : device_(device_tensors.front().device()),
        device_tensors_(std::move(device_tensors)),
        side_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index())) {
    c10::cuda::CUDAGuard on_device(device_);
    at::cuda::CUDAEvent queued;  // the tensors' producers, on the caller's stream
    queued.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    queued.block(side_);
    c10::cuda::CUDAStreamGuard on_side(side_);
    for (const auto& tensor : device_tensors_) {
      auto host = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
      host.copy_(tensor, /*non_blocking=*/true);
      // The caller may drop `tensor` when the call returns: its memory is not handed out
      // again before this copy has read it.
      c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), side_);
      host_tensors_.push_back(host);
    }
    copied_out_.record(side_);
  }

  std::vector<at::Tensor> host_tensors() override {
    copied_out_.synchronize();
    return host_tensors_;
  }

  std::vector<at::Tensor> copy_back(const std::vector<at::Tensor>& host,
                                    const std::vector<at::Tensor>& results) override {
    c10::cuda::CUDAGuard on_device(device_);
    c10::cuda::CUDAStreamGuard on_side(side_);
    std::vector<at::Tensor> outputs;
    for (const auto& result : results) {
      at::Tensor target = in_place_target(host, result);
      if (!target.defined()) target = at::empty(result.sizes(), result.options().device(device_));
      target.copy_(result, /*non_blocking=*/true);
      keep_until_copied(result);
      c10::cuda::CUDACachingAllocator::recordStream(target.storage().data_ptr(), side_);
      outputs.push_back(target);
    }
    copied_back_.record(side_);
    return outputs;
  }

  void order_current_stream() override { copied_back_.block(c10::cuda::getCurrentCUDAStream(device_.index())); }

 private:
  // The device tensor a result written in place came from; undefined for a new result.
  at::Tensor in_place_target(const std::vector<at::Tensor>& host, const at::Tensor& result) const {
    for (size_t i = 0; i < host.size(); ++i) {
      if (result.is_same(host[i])) return device_tensors_[i];
    }
    return {};
  }

  // A pinned block returns to the host allocator's pool when its tensor dies, but is handed
  // out again only once the copies recorded on it are done (pageable results are copied
  // before copy_ returns, and are not the pool's).
  void keep_until_copied(const at::Tensor& host) {
    const auto& data = host.storage().data_ptr();
    at::cuda::CachingHostAllocator_recordEvent(data.get(), data.get_context(), side_);
  }

  at::Device device_;
  std::vector<at::Tensor> device_tensors_;
  std::vector<at::Tensor> host_tensors_;
  c10::cuda::CUDAStream side_;
  at::cuda::CUDAEvent copied_out_;
  at::cuda::CUDAEvent copied_back_;
};

}  // namespace

std::shared_ptr<HostStaging> stage_on_host(const std::vector<at::Tensor>& tensors, Collective kind) {
  if (tensors.empty() || tensors.front().device().is_cpu()) return nullptr;
  if (!tensors.front().is_cuda()) {
    throw Error("lockstep::" + to_string(kind) + ": the tensor is on " + tensors.front().device().str() +
                "; lockstep's collectives take CPU and CUDA tensors");
  }
  return std::make_shared<CudaHostStaging>(tensors);
}

bool built_with_cuda() { return true; }

}  // namespace lockstep
