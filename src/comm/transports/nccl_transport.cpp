// NCCL, a group's device transport for CUDA (comm/transports/device_transports.h). CUDA tensors move over
// one NCCL communicator and one stream per device, made in the turn of the first collective
// on that device, after an exchange over the group's host transport. The NCCL linked is the
// one beside the libtorch lockstep was built against (cmake/nccl.cmake), so one copy is
// loaded; device_transports() says so when the loaded one is not the one compiled against.
//
// Communicators are non-blocking, so that no NCCL call waits beyond the group's timeout:
// a call that returns ncclInProgress is polled until it settles. Work queued on the device
// is watched by the Communicator, which asks device_error() for NCCL's asynchronous errors
// and calls abort() before it ends the job.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include "comm/transports/device_transports.h"
#include "lockstep/error.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "lockstep's NCCL transport needs NCCL 2.14 or later (non-blocking communicators, ncclCommFinalize)"
#endif

namespace lockstep {
namespace {

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
    case ReduceOp::Avg: return ncclAvg;  // floating dtypes only (NcclTransport::averages)
  }
  throw Error("lockstep: NCCL cannot reduce with " + to_string(op));
}

std::string last_error(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text && *text ? std::string(" (") + text + ")" : "";
}

// What rank 0 tells the others once they know that every rank has a GPU of its own.
struct UniqueIdOffer {
  int32_t has_id;  // rank 0 could make the unique id
  ncclUniqueId id;
};

// A GPU's UUID: ranks with equal ones share a GPU.
struct Gpu {
  char uuid[16];
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

class NcclTransport : public DeviceTransport {
 public:
  NcclTransport(HostTransport& host, DeviceBackend mode, std::chrono::milliseconds timeout)
      : host_(host), mode_(mode), timeout_(timeout) {}

  // Flushed within the timeout only after the group's last barrier; after a failure, or at
  // an exit without shutdown(), peers may be gone and NCCL aborts at once (as PyTorch's
  // ProcessGroupNCCL does when destroy_process_group() was not called).
  ~NcclTransport() override {
    for (auto& [index, device] : devices_) {
      if (!device || device->aborted) continue;
      if (left_gracefully_) {
        destroy(*device);
      } else {
        abort_within(device->comm);
      }
    }
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return "nccl"; }

  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t) override {
    DeviceComm& d = device_of(tensor);
    const ncclResult_t started = ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), nccl_type(tensor),
                                               nccl_op(op), d.comm, d.stream.stream());
    throw_unless_done(started, d.comm, "ncclAllReduce");
  }

  void broadcast(at::Tensor& tensor, int root, uint32_t) override {
    DeviceComm& d = device_of(tensor);
    const ncclResult_t started = ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), nccl_type(tensor),
                                               root, d.comm, d.stream.stream());
    throw_unless_done(started, d.comm, "ncclBroadcast");
  }

  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t) override {
    DeviceComm& d = device_of(tensor);
    // Only the root's receive buffer is written: other ranks' tensors stay as they were.
    const ncclResult_t started = ncclReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), nccl_type(tensor),
                                            nccl_op(op), root, d.comm, d.stream.stream());
    throw_unless_done(started, d.comm, "ncclReduce");
  }

  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t) override {
    DeviceComm& d = device_of(input);
    const ncclResult_t started =
        ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), nccl_type(input), d.comm, d.stream.stream());
    throw_unless_done(started, d.comm, "ncclAllGather");
  }

  void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t) override {
    DeviceComm& d = device_of(input);
    const ncclResult_t started = ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                                   nccl_type(input), nccl_op(op), d.comm, d.stream.stream());
    throw_unless_done(started, d.comm, "ncclReduceScatter");
  }

  // Inside the group each primitive only records its work, on the communicator of the
  // call's one device; ncclGroupEnd launches it all and, on a non-blocking communicator,
  // may return while that is in progress.
  void together(const std::function<void()>& primitives) override {
    throw_unless_done(ncclGroupStart(), nullptr, "ncclGroupStart");
    grouped_comm_ = nullptr;
    try {
      primitives();
    } catch (...) {
      ncclGroupEnd();  // the thread leaves the group whatever its primitives did
      throw;
    }
    throw_unless_done(ncclGroupEnd(), grouped_comm_, "ncclGroupEnd of a coalesced call");
  }

  // ncclAvg multiplies each rank's values by 1/size before summing, in the tensor's dtype:
  // it cannot overflow, but it rounds differently from the host transports' wider sums.
  bool averages(at::ScalarType dtype) const override { return at::isFloatingType(dtype); }

  std::optional<c10::Stream> device_stream(at::Device device) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = devices_.find(device.index());
      if (found != devices_.end()) return stream_of(found->second.get());
    }
    auto connected = connect(device);  // every rank, in this call's turn
    std::lock_guard<std::mutex> lock(mutex_);
    return stream_of(devices_.emplace(device.index(), std::move(connected)).first->second.get());
  }

  bool connected(at::Device device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return devices_.count(device.index()) > 0;
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

  // Called from the watchdog while the collective thread may hold a DeviceComm: entries
  // are marked, never erased.
  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [index, device] : devices_) {
      if (device) abort_once(*device);
    }
  }

  void leave_gracefully() override { left_gracefully_ = true; }

 private:
  // One device's communicator and the stream its collectives run on.
  struct DeviceComm {
    ncclComm_t comm;
    c10::cuda::CUDAStream stream;
    bool aborted = false;  // after a failure: nothing more runs on it
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
    if (found->second->aborted) {
      throw Error("lockstep: NCCL's communicator for " + tensor.device().str() +
                  " was aborted after an earlier failure");
    }
    grouped_comm_ = found->second->comm;
    return *found->second;
  }

  // Null where Auto stages this device's tensors instead: some ranks share a GPU. GPUs are
  // compared first, so that rank 0 makes a unique id (which starts NCCL's bootstrap
  // thread, waiting for ranks that would never come) only for a communicator it will make.
  std::unique_ptr<DeviceComm> connect(at::Device device) {
    Gpu mine{};
    std::memcpy(mine.uuid, at::cuda::getDeviceProperties(device.index())->uuid.bytes, sizeof(mine.uuid));
    std::vector<Gpu> gpus(size());
    host_.all_gather_bytes(&mine, gpus.data(), sizeof(Gpu), tag_of(ReservedTag::ConnectDevice));
    const std::string shared = shared_gpu(gpus);
    if (!shared.empty() && mode_ == DeviceBackend::Auto) {
      say_once_that_groups_stage(shared);
      return nullptr;
    }
    UniqueIdOffer offer{};
    ncclResult_t made = ncclSuccess;
    if (rank() == 0) {
      made = ncclGetUniqueId(&offer.id);
      offer.has_id = made == ncclSuccess;
    }
    std::vector<UniqueIdOffer> offers(size());
    host_.all_gather_bytes(&offer, offers.data(), sizeof(UniqueIdOffer), tag_of(ReservedTag::ConnectDevice) + 1);
    if (!offers[0].has_id) {
      throw Error("lockstep: rank 0 could not make an NCCL unique id" +
                  (rank() == 0 ? std::string(": ") + ncclGetErrorString(made) + last_error(nullptr) : std::string()));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    try {
      // Called first: as an argument beside it, `comm` could be read before the call sets it
      // (the order arguments are evaluated in is unspecified).
      const ncclResult_t started = ncclCommInitRankConfig(&comm, size(), offers[0].id, rank(), &config);
      throw_unless_done(started, comm, "making the NCCL communicator of " + device.str());
    } catch (const Error& e) {
      if (shared.empty()) throw;
      throw Error(std::string(e.what()) + "\n" + shared +
                  ": NCCL needs a GPU per rank. Give each rank its own device, "
                  "or use the device backend auto or staged, which stage CUDA tensors through host memory");
    }
    return std::make_unique<DeviceComm>(
        DeviceComm{comm, c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index())});
  }

  // ncclCommAbort can itself hang (a proxy thread stuck on a dead peer's socket): waited
  // for a bounded time, then left to the process's exit.
  static void abort_within(ncclComm_t comm) {
    constexpr auto kLimit = std::chrono::seconds(10);
    auto aborted = std::make_shared<std::promise<void>>();
    std::future<void> done = aborted->get_future();
    std::thread([comm, aborted] {
      ncclCommAbort(comm);
      aborted->set_value();
    }).detach();
    if (done.wait_for(kLimit) != std::future_status::ready) {
      std::fprintf(stderr, "lockstep: ncclCommAbort did not return within %lld s; the process's exit ends it\n",
                   static_cast<long long>(kLimit.count()));
    }
  }

  // More ranks than GPUs (-n 2 on one GPU) is a setup a user means: said once, not refused.
  void say_once_that_groups_stage(const std::string& shared) const {
    static std::once_flag once;
    if (rank() != 0) return;
    std::call_once(once, [&] {
      std::fprintf(stderr,
                   "lockstep: %s; NCCL needs a GPU per rank, so groups where ranks share a GPU stage CUDA "
                   "tensors through host memory\n",
                   shared.c_str());
    });
  }

  // "ranks 0 and 1 share GPU <uuid>", or "" when every rank has its own.
  static std::string shared_gpu(const std::vector<Gpu>& all) {
    for (size_t a = 0; a < all.size(); ++a) {
      for (size_t b = a + 1; b < all.size(); ++b) {
        if (std::memcmp(all[a].uuid, all[b].uuid, sizeof(all[a].uuid)) == 0) {
          return "ranks " + std::to_string(a) + " and " + std::to_string(b) + " share GPU " +
                 hex(all[a].uuid, sizeof(all[a].uuid));
        }
      }
    }
    return "";
  }

  // What a call on a non-blocking communicator came to: polled while it is in progress, for
  // at most the timeout (then still ncclInProgress). A communicator that cannot even be
  // asked has failed: that failure, not a timeout that never passed.
  ncclResult_t result_when_done(ncclResult_t result, ncclComm_t comm) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (result == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const ncclResult_t asked = ncclCommGetAsyncError(comm, &result);
      if (asked != ncclSuccess) return asked;
    }
    return result;
  }

  // Throws unless the call succeeded within the timeout. A communicator that failed is
  // aborted, so that nothing of it keeps the GPU busy.
  void throw_unless_done(ncclResult_t result, ncclComm_t comm, const std::string& what) {
    result = result_when_done(result, comm);
    if (result == ncclSuccess) return;
    const std::string why =
        result == ncclInProgress
            ? "did not finish within " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) + " s"
            : std::string("failed: ") + ncclGetErrorString(result) + last_error(comm);
    abort_failed(comm);
    if (result == ncclInProgress) throw TimeoutError("lockstep: " + what + " " + why);
    throw Error("lockstep: " + what + " " + why);
  }

  void abort_failed(ncclComm_t comm) {
    if (!comm) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [index, device] : devices_) {
      if (device && device->comm == comm) return abort_once(*device);
    }
    abort_within(comm);  // one that connect() never kept
  }

  static void abort_once(DeviceComm& device) {
    if (device.aborted) return;
    device.aborted = true;
    abort_within(device.comm);
  }

  // Flushes what was queued, within the timeout, then frees the communicator; one that
  // cannot finish is aborted.
  void destroy(DeviceComm& device) {
    if (result_when_done(ncclCommFinalize(device.comm), device.comm) == ncclSuccess) {
      ncclCommDestroy(device.comm);
    } else {
      abort_within(device.comm);
    }
  }

  HostTransport& host_;       // the group's; outlives this
  const DeviceBackend mode_;  // Nccl, or Auto: NCCL only where every rank has a GPU of its own
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;  // guards devices_: the watchdog asks for errors from its own thread
  std::map<int, std::unique_ptr<DeviceComm>> devices_;  // by device index; null: staged
  std::atomic<bool> left_gracefully_{false};
  ncclComm_t grouped_comm_ = nullptr;  // the last primitive's: the group's, in together()
};

// The NCCL loaded at run time should be the one compiled against (cmake/nccl.cmake finds
// the one beside libtorch); a different one means a second copy may be in the process.
void say_if_another_nccl_is_loaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    int loaded = 0;
    if (ncclGetVersion(&loaded) != ncclSuccess) return;
    const auto major_minor = [](int code) {
      // Codes are major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 + patch before.
      return code >= 10000 ? std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100)
                           : std::to_string(code / 1000) + "." + std::to_string(code / 100 % 10);
    };
    if (major_minor(loaded) != major_minor(NCCL_VERSION_CODE)) {
      std::fprintf(stderr,
                   "lockstep: NCCL %s is loaded, but lockstep was compiled against NCCL %s; rebuild lockstep "
                   "against the NCCL beside libtorch (docs/GPU.md)\n",
                   major_minor(loaded).c_str(), major_minor(NCCL_VERSION_CODE).c_str());
    }
  });
}

}  // namespace

bool built_with_nccl() { return true; }

DeviceTransports device_transports(HostTransport& host, DeviceBackend backend, std::chrono::milliseconds timeout) {
  const bool wanted =
      backend == DeviceBackend::Nccl || (backend == DeviceBackend::Auto && c10::cuda::device_count() > 0);
  DeviceTransports transports;
  if (!wanted) return transports;
  say_if_another_nccl_is_loaded();
  transports.emplace(at::kCUDA, std::make_unique<NcclTransport>(host, backend, timeout));
  return transports;
}

}  // namespace lockstep
