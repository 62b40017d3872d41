// NCCL beside a group's host transport (comm/device_engine.h). CUDA tensors move over one
// NCCL communicator and one stream per device, made in the turn of the first collective on
// that device; everything else (CPU tensors, barriers, the mismatch checks and the reports
// of failures) goes over the host transport it wraps. The NCCL linked is the one beside the
// libtorch lockstep was built against (CMakeLists.txt), so one copy is loaded.
//
// Communicators are non-blocking, so that no NCCL call waits beyond the group's timeout:
// a call that returns ncclInProgress is polled until it settles. Work queued on the device
// is watched by the Communicator, which asks device_error() for NCCL's asynchronous errors
// and calls abort() before it ends the job.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include "comm/device_engine.h"
#include "lockstep/comm/error.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "lockstep's NCCL transport needs NCCL 2.14 or later (non-blocking communicators, ncclCommFinalize)"
#endif

namespace lockstep {
namespace {

// Tags of the host transport's exchanges for NCCL. Collectives' tags are fingerprints; the
// Communicator's own exchanges use 0x80000000 and 0x40000000.
constexpr uint32_t kFingerprintTag = 0x20000000u;
constexpr uint32_t kConnectTag = 0x20000001u;

ncclDataType_t nccl_type(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    default: throw Error("lockstep: NCCL cannot move " + std::string(c10::toString(tensor.scalar_type())));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Avg: break;  // the Communicator sends Sum and divides
  }
  throw Error("lockstep: the NCCL transport got " + to_string(op) + ", which travels as Sum");
}

std::string last_error(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text && *text ? std::string(" (") + text + ")" : "";
}

// What each rank tells the others before they make a communicator for a device.
struct Offer {
  char gpu[16];     // the GPU's UUID: ranks with equal ones share a GPU
  int32_t has_id;   // rank 0 could make the unique id
  ncclUniqueId id;  // rank 0's
};

std::string hex(const char* bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    text += digits[(bytes[i] >> 4) & 0xf];
    text += digits[bytes[i] & 0xf];
  }
  return text;
}

class NcclTransport : public Transport {
 public:
  NcclTransport(std::unique_ptr<Transport> host, Backend mode, std::chrono::milliseconds timeout)
      : host_(std::move(host)), mode_(mode), timeout_(timeout) {}

  ~NcclTransport() override {
    for (auto& [index, device] : devices_) {
      if (device) destroy(*device);
    }
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string name() const override { return host_->name() + "+nccl"; }

  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override {
    if (!tensor.is_cuda()) return host_->all_reduce(tensor, op, tag);
    DeviceComm& d = device_of(tensor);
    settle(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), nccl_type(tensor), nccl_op(op),
                         d.comm, d.stream.stream()),
           d.comm, "ncclAllReduce");
  }

  void broadcast(at::Tensor& tensor, int root, uint32_t tag) override {
    if (!tensor.is_cuda()) return host_->broadcast(tensor, root, tag);
    DeviceComm& d = device_of(tensor);
    settle(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), nccl_type(tensor), root, d.comm,
                         d.stream.stream()),
           d.comm, "ncclBroadcast");
  }

  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override {
    if (!tensor.is_cuda()) return host_->reduce(tensor, root, op, tag);
    DeviceComm& d = device_of(tensor);
    // Only the root's receive buffer is written: other ranks' tensors stay as they were.
    settle(ncclReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), nccl_type(tensor), nccl_op(op), root,
                      d.comm, d.stream.stream()),
           d.comm, "ncclReduce");
  }

  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override {
    if (!input.is_cuda()) return host_->all_gather(input, output, tag);
    DeviceComm& d = device_of(input);
    settle(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), nccl_type(input), d.comm,
                         d.stream.stream()),
           d.comm, "ncclAllGather");
  }

  void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) override {
    if (!input.is_cuda()) return host_->reduce_scatter(input, output, op, tag);
    DeviceComm& d = device_of(input);
    settle(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), nccl_type(input), nccl_op(op),
                             d.comm, d.stream.stream()),
           d.comm, "ncclReduceScatter");
  }

  void barrier(uint32_t tag) override { host_->barrier(tag); }
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override {
    host_->all_gather_bytes(input, output, bytes, tag);
  }
  at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, uint32_t tag) override {
    return host_->empty_shared(sizes, dtype, tag);
  }

  // NCCL trusts its callers: ranks that disagree on a CUDA call would hang or exchange
  // garbage, so every such call is compared first, over the host transport.
  bool checks_every_call(const Call& call) const override {
    return call.device_type == at::kCUDA || host_->checks_every_call(call);
  }
  bool same_fingerprint_everywhere(uint64_t fingerprint) override {
    std::vector<uint64_t> all(size());
    host_->all_gather_bytes(&fingerprint, all.data(), sizeof(fingerprint), kFingerprintTag);
    return std::all_of(all.begin(), all.end(), [&](uint64_t f) { return f == fingerprint; });
  }
  bool can_give_up() const override { return host_->can_give_up(); }
  std::exception_ptr explain_failure(const Call& call, const std::exception& failure,
                                     std::chrono::steady_clock::duration elapsed,
                                     std::chrono::milliseconds timeout) override {
    return host_->explain_failure(call, failure, elapsed, timeout);
  }

  std::optional<c10::Stream> device_stream(at::Device device) override {
    if (!device.is_cuda()) return std::nullopt;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = devices_.find(device.index());
      if (found != devices_.end()) return stream_of(found->second.get());
    }
    auto connected = connect(device);  // every rank, in this call's turn
    std::lock_guard<std::mutex> lock(mutex_);
    return stream_of(devices_.emplace(device.index(), std::move(connected)).first->second.get());
  }

  std::string device_error() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [index, device] : devices_) {
      ncclResult_t state = ncclSuccess;
      if (!device || ncclCommGetAsyncError(device->comm, &state) != ncclSuccess) continue;
      if (state != ncclSuccess && state != ncclInProgress) {
        return "NCCL on cuda:" + std::to_string(index) + ": " + ncclGetErrorString(state) + last_error(device->comm);
      }
    }
    return "";
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [index, device] : devices_) {
      if (device) ncclCommAbort(device->comm);
    }
    devices_.clear();
  }

 private:
  // One device's communicator and the stream its collectives run on.
  struct DeviceComm {
    ncclComm_t comm;
    c10::cuda::CUDAStream stream;
  };

  static std::optional<c10::Stream> stream_of(const DeviceComm* device) {
    if (!device) return std::nullopt;  // the ranks share a GPU: staged through host memory
    return device->stream.unwrap();
  }

  DeviceComm& device_of(const at::Tensor& tensor) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = devices_.find(tensor.device().index());
    if (found == devices_.end() || !found->second) {
      throw Error("lockstep: NCCL has no communicator for " + tensor.device().str());
    }
    return *found->second;
  }

  // Null where Auto stages this device's tensors instead: some ranks share a GPU.
  std::unique_ptr<DeviceComm> connect(at::Device device) {
    Offer mine{};
    std::memcpy(mine.gpu, at::cuda::getDeviceProperties(device.index())->uuid.bytes, sizeof(mine.gpu));
    ncclResult_t made = ncclSuccess;
    if (rank() == 0) {
      made = ncclGetUniqueId(&mine.id);
      mine.has_id = made == ncclSuccess;
    }
    std::vector<Offer> all(size());
    host_->all_gather_bytes(&mine, all.data(), sizeof(Offer), kConnectTag);
    const std::string shared = shared_gpu(all);
    if (!shared.empty() && mode_ == Backend::Auto) return nullptr;
    if (!all[0].has_id) {
      throw Error("lockstep: rank 0 could not make an NCCL unique id" +
                  (rank() == 0 ? std::string(": ") + ncclGetErrorString(made) + last_error(nullptr) : std::string()));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    try {
      settle(ncclCommInitRankConfig(&comm, size(), all[0].id, rank(), &config), comm,
             "making the NCCL communicator of " + device.str());
    } catch (const Error& e) {
      if (shared.empty()) throw;
      throw Error(std::string(e.what()) + "\n" + shared + ": NCCL needs a GPU per rank. Give each rank its own "
                  "device, or use the gloo backend, which stages CUDA tensors through host memory");
    }
    return std::make_unique<DeviceComm>(DeviceComm{comm, c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index())});
  }

  // "ranks 0 and 1 share GPU <uuid>", or "" when every rank has its own.
  static std::string shared_gpu(const std::vector<Offer>& all) {
    for (size_t a = 0; a < all.size(); ++a) {
      for (size_t b = a + 1; b < all.size(); ++b) {
        if (std::memcmp(all[a].gpu, all[b].gpu, sizeof(all[a].gpu)) == 0) {
          return "ranks " + std::to_string(a) + " and " + std::to_string(b) + " share GPU " +
                 hex(all[a].gpu, sizeof(all[a].gpu));
        }
      }
    }
    return "";
  }

  // What a call on a non-blocking communicator came to: polled while it is in progress, for
  // at most the timeout (then still ncclInProgress).
  ncclResult_t outcome(ncclResult_t result, ncclComm_t comm) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (result == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) break;
    }
    return result;
  }

  // Throws unless the call succeeded within the timeout. A communicator that failed is
  // aborted, so that nothing of it keeps the GPU busy.
  void settle(ncclResult_t result, ncclComm_t comm, const std::string& what) {
    result = outcome(result, comm);
    if (result == ncclSuccess) return;
    const std::string why = result == ncclInProgress
        ? "did not finish within " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) + " s"
        : std::string("failed: ") + ncclGetErrorString(result) + last_error(comm);
    forget(comm);
    if (result == ncclInProgress) throw TimeoutError("lockstep: " + what + " " + why);
    throw Error("lockstep: " + what + " " + why);
  }

  void forget(ncclComm_t comm) {
    if (!comm) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = devices_.begin(); it != devices_.end(); ++it) {
      if (it->second && it->second->comm == comm) {
        devices_.erase(it);
        break;
      }
    }
    ncclCommAbort(comm);
  }

  // Flushes what was queued, within the timeout, then frees the communicator; one that
  // cannot finish is aborted.
  void destroy(DeviceComm& device) {
    if (outcome(ncclCommFinalize(device.comm), device.comm) == ncclSuccess) {
      ncclCommDestroy(device.comm);
    } else {
      ncclCommAbort(device.comm);
    }
  }

  const std::unique_ptr<Transport> host_;
  const Backend mode_;  // Nccl, or Auto: NCCL only where every rank has a GPU of its own
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;  // guards devices_: the watchdog asks for errors from its own thread
  std::map<int, std::unique_ptr<DeviceComm>> devices_;  // by device index; null: staged
};

}  // namespace

bool built_with_nccl() { return true; }

std::unique_ptr<Transport> with_device_engine(std::unique_ptr<Transport> host, const WorldSpec& spec) {
  const bool wanted = spec.cuda_backend == Backend::Nccl ||
                      (spec.cuda_backend == Backend::Auto && c10::cuda::device_count() > 0);
  if (!wanted) return host;
  return std::make_unique<NcclTransport>(std::move(host), spec.cuda_backend, spec.timeout);
}

}  // namespace lockstep
