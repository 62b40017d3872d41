#include "comm/groups/communicator.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "comm/calls/averaging.h"
#include "comm/groups/call_observer.h"
#include "comm/transports/device_call.h"
#include "comm/calls/work_state.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

std::string shape_string(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

// Called on every collective: the messages are built only when something is wrong.
void check_tensor(const at::Tensor& t, Collective kind) {
  const auto where = [kind] { return "lockstep::" + to_string(kind) + ": "; };
  if (!t.defined()) throw Error(where() + "the tensor is undefined");
  if (t.layout() != at::kStrided) {
    throw Error(where() + "sparse tensors are not supported; pass tensor.to_dense()");
  }
  if (!t.is_contiguous()) {
    throw Error(where() + "the tensor of shape " + shape_string(t.sizes()) + " with strides " +
                shape_string(t.strides()) + " is not contiguous; pass tensor.contiguous()");
  }
  if (!is_supported_dtype(t.scalar_type())) {
    throw Error(where() + "dtype " + std::string(c10::toString(t.scalar_type())) +
                " is not supported; use float32, float64, float16, bfloat16, int32, int64 "
                "or uint8");
  }
}

// One call moves tensors of one device: staging copies them with one device's streams.
void check_one_device(const std::vector<at::Tensor>& tensors, Collective kind) {
  for (const auto& t : tensors) {
    if (t.device() != tensors.front().device()) {
      throw Error("lockstep::" + to_string(kind) + ": one call has tensors on " + tensors.front().device().str() +
                  " and on " + t.device().str() + "; pass tensors of one device");
    }
  }
}

void check_root(int root, int world_size, Collective kind) {
  if (root < 0 || root >= world_size) {
    throw Error("lockstep::" + to_string(kind) + ": root " + std::to_string(root) + " is not a rank; ranks are 0.." +
                std::to_string(world_size - 1));
  }
}

// Avg of a dtype the transport does not average itself travels as Sum, in averaging_dtype,
// and is divided afterwards (write_mean).
bool sent_as_sum(const Transport& transport, ReduceOp op, const at::Tensor& tensor) {
  return op == ReduceOp::Avg && !transport.averages(tensor.scalar_type());
}

ReduceOp op_on_the_wire(bool as_sum, ReduceOp op) { return as_sum ? ReduceOp::Sum : op; }

// What the transport reduces for `tensor`: itself, or for an Avg sent as Sum a copy in
// averaging_dtype.
at::Tensor tensor_on_the_wire(const at::Tensor& tensor, bool as_sum) {
  return as_sum ? tensor.to(averaging_dtype(tensor.scalar_type())) : tensor;
}

// When a collective started, for the watchdog and error messages: the kernel's coarse clock
// (it ticks every few ms, never ahead of steady_clock) costs a fraction of a precise
// reading, which small collectives would feel.
std::chrono::steady_clock::time_point coarse_now() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(now.tv_sec) +
                                               std::chrono::nanoseconds(now.tv_nsec));
}

// A coalesced call's tensors of one dtype: packed in one buffer, or one tensor moved in place.
struct Pack {
  at::Tensor packed;
  std::vector<at::Tensor> parts;  // flat views of the tensors packed; none for one moved in place
};

// Tensors of one dtype travel packed in one buffer: one primitive per dtype, not per tensor.
std::vector<Pack> packs_by_dtype(const std::vector<at::Tensor>& tensors) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) {
    if (t.numel() > 0) by_dtype[t.scalar_type()].push_back(t.view(-1));
  }
  std::vector<Pack> packs;
  for (auto& [dtype, parts] : by_dtype) {
    if (parts.size() == 1) {
      packs.push_back({parts[0], {}});  // alone in its dtype: no packing copies
    } else {
      packs.push_back({at::cat(parts), std::move(parts)});
    }
  }
  return packs;
}

void unpack(const std::vector<Pack>& packs) {
  for (const auto& pack : packs) {
    int64_t offset = 0;
    for (const auto& part : pack.parts) {
      part.copy_(pack.packed.slice(0, offset, offset + part.numel()));
      offset += part.numel();
    }
  }
}

// What ranks exchange to find out how their calls differ.
struct CallSummary {
  uint64_t fingerprint;
  char text[248];
};

}  // namespace

Communicator::Communicator(GroupTransports transports, std::chrono::milliseconds timeout, bool debug)
    : host_(std::move(transports.host)),
      devices_(std::move(transports.devices)),
      rank_(host_->rank()),
      world_size_(host_->size()),
      timeout_(timeout),
      debug_(debug),
      watchdog_(rank_, timeout_, *host_, devices_, [this] { return running(); }) {
  if (!host_->can_give_up()) watchdog_.watch_host_calls();
}

Communicator::~Communicator() { stop_worker(); }

std::string Communicator::transport_name() const {
  std::string name = host_->name();
  for (const auto& [type, device] : devices_)
    name += ", " + device->name() + " for " + c10::DeviceTypeName(type, /*lower_case=*/true);
  return name;
}

bool Communicator::sums_independent_of_layout(at::Device device) const {
  if (!host_->sums_independent_of_layout()) return false;
  const auto found = devices_.find(device.type());
  return found == devices_.end() || found->second->sums_independent_of_layout();
}

void Communicator::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

void Communicator::leave_gracefully() {
  for (const auto& [type, device] : devices_) device->leave_gracefully();
}

void Communicator::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

// ---- collectives: check arguments on the caller's thread, then queue the work ----

template <typename Move, typename Finish>
void Communicator::move_packed(Transport& transport, std::vector<at::Tensor>& tensors, uint32_t tag, const Move& move,
                               const Finish& finish) {
  if (tensors.size() == 1) {
    if (tensors[0].numel() == 0) return;
    at::Tensor moved = move(tensors[0], tag);
    finish(moved, tensors[0]);
    return;
  }
  std::vector<Pack> packs = packs_by_dtype(tensors);
  std::vector<at::Tensor> moved(packs.size());
  const auto move_all = [&] {
    for (size_t i = 0; i < packs.size(); ++i) moved[i] = move(packs[i].packed, tag + static_cast<uint32_t>(i));
  };
  // Results are read only after the last primitive: inside an NCCL group, a kernel queued
  // between two primitives would run before either of them.
  if (packs.size() > 1) {
    transport.together(move_all);
  } else {
    move_all();
  }
  for (size_t i = 0; i < packs.size(); ++i) finish(moved[i], packs[i].packed);
  unpack(packs);
}

Work Communicator::all_reduce(std::vector<at::Tensor> tensors, ReduceOp op, bool blocking) {
  for (const auto& t : tensors) check_tensor(t, Collective::AllReduce);
  check_one_device(tensors, Collective::AllReduce);
  if (tensors.empty()) return Work();
  Call call(Collective::AllReduce, tensors, op);
  return submit_on(
      std::move(tensors), std::move(call),
      [this, op](const Call& c, Transport& transport, std::vector<at::Tensor>& tensors) {
        const auto move = [&](at::Tensor& packed, uint32_t tag) {
          const bool as_sum = sent_as_sum(transport, op, packed);
          at::Tensor wire = tensor_on_the_wire(packed, as_sum);
          transport.all_reduce(wire, op_on_the_wire(as_sum, op), tag);
          return wire;
        };
        const auto finish = [&](at::Tensor& wire, at::Tensor& packed) {
          if (sent_as_sum(transport, op, packed)) write_mean(wire, world_size_, packed);
        };
        move_packed(transport, tensors, c.tag(), move, finish);
        return std::move(tensors);  // a task runs once: its tensors can move into the Work
      },
      blocking);
}

Work Communicator::broadcast(std::vector<at::Tensor> tensors, int root, bool blocking) {
  for (const auto& t : tensors) check_tensor(t, Collective::Broadcast);
  check_root(root, world_size_, Collective::Broadcast);
  check_one_device(tensors, Collective::Broadcast);
  if (tensors.empty()) return Work();
  Call call(Collective::Broadcast, tensors, ReduceOp::Sum, root);
  return submit_on(
      std::move(tensors), std::move(call),
      [this, root](const Call& c, Transport& transport, std::vector<at::Tensor>& tensors) {
        const auto move = [&](at::Tensor& packed, uint32_t tag) {
          transport.broadcast(packed, root, tag);
          return packed;
        };
        move_packed(transport, tensors, c.tag(), move, [](at::Tensor&, at::Tensor&) {});
        return std::move(tensors);
      },
      blocking);
}

Work Communicator::reduce(at::Tensor tensor, int root, ReduceOp op, bool blocking) {
  check_tensor(tensor, Collective::Reduce);
  check_root(root, world_size_, Collective::Reduce);
  Call call(Collective::Reduce, {tensor}, op, root);
  return submit_on(
      {tensor}, std::move(call),
      [this, root, op](const Call& c, Transport& transport, std::vector<at::Tensor>& tensors) {
        at::Tensor& tensor = tensors[0];
        if (tensor.numel() == 0) return tensors;
        const bool as_sum = sent_as_sum(transport, op, tensor);
        at::Tensor wire = tensor_on_the_wire(tensor, as_sum);
        transport.reduce(wire, root, op_on_the_wire(as_sum, op), c.tag());
        if (as_sum && rank_ == root) write_mean(wire, world_size_, tensor);
        return std::move(tensors);
      },
      blocking);
}

Work Communicator::all_gather(at::Tensor tensor, bool blocking) {
  check_tensor(tensor, Collective::AllGather);
  Call call(Collective::AllGather, {tensor});
  return submit_on(
      {tensor}, std::move(call),
      [this](const Call& c, Transport& transport, std::vector<at::Tensor>& tensors) {
        const at::Tensor& tensor = tensors[0];
        std::vector<int64_t> shape{world_size_};
        shape.insert(shape.end(), tensor.sizes().begin(), tensor.sizes().end());
        at::Tensor gathered = at::empty(shape, tensor.options());
        if (tensor.numel() > 0) transport.all_gather(tensor, gathered, c.tag());
        return gathered.unbind(0);
      },
      blocking);
}

Work Communicator::reduce_scatter(at::Tensor input, ReduceOp op, bool blocking) {
  check_tensor(input, Collective::ReduceScatter);
  if (input.dim() == 0 || input.size(0) % world_size_ != 0) {
    throw Error(
        "lockstep::reduce_scatter: the input's first dimension must be divisible by "
        "the world size " +
        std::to_string(world_size_) + ", but its shape is " + shape_string(input.sizes()));
  }
  Call call(Collective::ReduceScatter, {input}, op);
  return submit_on(
      {input}, std::move(call),
      [this, op](const Call& c, Transport& transport, std::vector<at::Tensor>& tensors) {
        const at::Tensor& input = tensors[0];
        std::vector<int64_t> shape = input.sizes().vec();
        shape[0] /= world_size_;
        at::Tensor output = at::empty(shape, input.options());
        if (input.numel() == 0) return std::vector<at::Tensor>{output};
        const bool as_sum = sent_as_sum(transport, op, input);
        const at::Tensor wire = tensor_on_the_wire(input, as_sum);
        at::Tensor wire_output = as_sum ? at::empty(shape, wire.options()) : output;
        transport.reduce_scatter(wire, wire_output, op_on_the_wire(as_sum, op), c.tag());
        if (as_sum) write_mean(wire_output, world_size_, output);
        return std::vector<at::Tensor>{output};
      },
      blocking);
}

namespace {

// Ranges that cover `numel` elements in order, each owned by a rank of the group or by all.
void check_ranges(const std::vector<OwnedRange>& ranges, int64_t numel, int world_size) {
  int64_t begin = 0;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const OwnedRange& range = ranges[k];
    const auto refuse = [&](const std::string& why) {
      throw Error("lockstep::reduce_to_owners: range " + std::to_string(k) + " (end " + std::to_string(range.end) +
                  ", owner " + std::to_string(range.owner) + ") " + why);
    };
    if (range.end < begin || range.end > numel) {
      refuse("does not end between its start " + std::to_string(begin) + " and the tensor's " + std::to_string(numel) +
             " elements");
    }
    if (range.owner != kEveryRank && (range.owner < 0 || range.owner >= world_size)) {
      refuse("is owned by no rank: owners are 0.." + std::to_string(world_size - 1) + " or kEveryRank");
    }
    begin = range.end;
  }
  if (begin != numel) {
    throw Error("lockstep::reduce_to_owners: the ranges cover " + std::to_string(begin) + " of the tensor's " +
                std::to_string(numel) + " elements; the last one must end at " + std::to_string(numel));
  }
}

uint64_t hash_of(const std::vector<OwnedRange>& ranges) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (end, owner)
  for (const auto& range : ranges) {
    for (uint64_t word : {static_cast<uint64_t>(range.end), static_cast<uint64_t>(range.owner)}) {
      h = (h ^ word) * 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

Work Communicator::reduce_to_owners(at::Tensor tensor, std::vector<OwnedRange> ranges, ReduceOp op, bool blocking) {
  check_tensor(tensor, Collective::ReduceToOwners);
  check_ranges(ranges, tensor.numel(), world_size_);
  Call call(Collective::ReduceToOwners, {tensor}, op);
  call.layout = hash_of(ranges);
  return submit_on(
      {tensor}, std::move(call),
      [this, op, ranges = std::move(ranges)](const Call& c, Transport& transport, std::vector<at::Tensor>& tensors) {
        at::Tensor& tensor = tensors[0];
        if (tensor.numel() == 0) return std::move(tensors);
        const bool as_sum = sent_as_sum(transport, op, tensor);
        at::Tensor wire = tensor_on_the_wire(tensor, as_sum);
        transport.reduce_to_owners(wire, ranges, op_on_the_wire(as_sum, op), c.tag());
        if (as_sum) write_mean(wire, world_size_, tensor);
        return std::move(tensors);
      },
      blocking);
}

at::Tensor Communicator::empty_shared(at::IntArrayRef sizes, at::ScalarType dtype) {
  const at::Tensor like = at::empty({0}, at::TensorOptions().dtype(dtype));
  check_tensor(like, Collective::EmptyShared);  // names an unsupported dtype
  Call call(Collective::EmptyShared, {like});
  call.shapes[0].assign(sizes.begin(), sizes.end());
  const std::vector<int64_t> shape = sizes.vec();
  return submit(
             std::move(call),
             [this, shape, dtype](const Call& c) {
               return std::vector<at::Tensor>{host_->empty_shared(shape, dtype, c.tag())};
             },
             /*blocking=*/true)
      .result()
      .at(0);
}

void Communicator::run_in_call_order(const std::function<void()>& body) {
  Call call(Collective::NewGroup, {});
  submit(
      std::move(call),
      [&body](const Call&) {
        body();
        return std::vector<at::Tensor>{};
      },
      /*blocking=*/true);
}

Work Communicator::barrier(bool blocking) {
  return submit(
      Call(Collective::Barrier, {}),
      [this](const Call& c) {
        host_->barrier(c.tag());
        return std::vector<at::Tensor>{};
      },
      blocking);
}

// ---- ordering and execution ----

Work Communicator::submit(Call&& call, Body body, bool blocking) {
  return submit_in_turn(
      std::move(call),
      [this, body = std::move(body)](const Call& c) {
        check_same_call(c, *host_);
        return body(c);
      },
      blocking, nullptr);
}

Work Communicator::submit_in_turn(Call&& call, Body body, bool blocking, std::function<void()> after_done,
                                  std::shared_ptr<DeviceCall> device_call) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) {
    throw Error("lockstep: cannot run " + to_string(call.kind) +
                ": lockstep::shutdown() ended "
                "its process group; groups made before a new init() cannot be used after it");
  }
  if (!failure_.empty()) {
    throw Error("lockstep: cannot run " + to_string(call.kind) +
                ": the process group failed earlier and is unusable; call "
                "lockstep::shutdown() and lockstep::init() again. The failure was: " +
                failure_);
  }
  if (stopping_) throw Error("lockstep: the process group is shutting down");
  call.seq = next_seq_++;
  detail::CallObserver* observer = detail::call_observer();
  const double queued_us = observer != nullptr && observer->watching() ? observer->now_us(timeline_rank_) : 0;
  if (blocking && queue_.empty() && !busy_) {
    // Here: no thread hand-off for the common synchronous call, and no state for another
    // thread to wait on.
    Task task{std::move(call), std::move(body), nullptr, queued_us, std::move(device_call)};
    TaskResult result = run_as_the_runner(lock, &task, 1);
    lock.unlock();
    if (result.error) std::rethrow_exception(result.error);
    if (after_done) after_done();
    return Work::completed(std::move(result.outputs));
  }
  auto state = std::make_shared<detail::WorkState>();
  state->after_done = std::move(after_done);
  state->run_here = [this](detail::WorkState& waited) { run_queued_through(waited); };
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  queue_.push_back(Task{std::move(call), std::move(body), state, queued_us, std::move(device_call)});
  changed_.notify_all();
  lock.unlock();
  Work work(state);
  if (blocking) work.wait();
  return work;
}

Work Communicator::submit_on(std::vector<at::Tensor> tensors, Call&& call, TensorBody body, bool blocking) {
  const detail::CallObserver* observer = detail::call_observer();
  const auto device_call = begin_device_call(tensors, call.kind, observer != nullptr && observer->watching());
  if (!device_call) {
    return submit_in_turn(
        std::move(call),
        [this, tensors = std::move(tensors), body = std::move(body)](const Call& c) mutable {
          check_same_call(c, *host_);
          return body(c, *host_, tensors);
        },
        blocking, nullptr);
  }
  const auto found = devices_.find(call.device_type);
  DeviceTransport* device = found == devices_.end() ? nullptr : found->second.get();
  return submit_in_turn(
      std::move(call),
      [this, device_call, device, body](const Call& c) {
        auto outputs = device_call->run(device, *host_, [&](Transport& moving, std::vector<at::Tensor>& moved) {
          check_same_call(c, moving);
          return body(c, moving, moved);
        });
        if (device_call->device_work_pending()) watchdog_.watch_device_work(c, device_call);
        return outputs;
      },
      blocking, [device_call] { device_call->order_current_stream(); }, device_call);
}

Communicator::TaskResult Communicator::run_as_the_runner(std::unique_lock<std::mutex>& lock, Task* tasks,
                                                         size_t count) {
  busy_ = true;  // nothing else runs a collective meanwhile
  lock.unlock();
  TaskResult last;
  for (size_t i = 0; i < count; ++i) {
    last = execute(tasks[i]);
    if (tasks[i].state) tasks[i].state->finish(std::move(last.outputs), last.error);
  }
  lock.lock();
  busy_ = false;
  changed_.notify_all();
  return last;
}

void Communicator::run_queued_through(detail::WorkState& waited) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto found =
      std::find_if(queue_.begin(), queue_.end(), [&](const Task& t) { return t.state.get() == &waited; });
  if (found == queue_.end() || busy_) return;  // running or done: wait for it as usual
  // Everything up to it, in order: collectives must run in the order they were called.
  std::vector<Task> mine(std::make_move_iterator(queue_.begin()), std::make_move_iterator(std::next(found)));
  queue_.erase(queue_.begin(), std::next(found));
  run_as_the_runner(lock, mine.data(), mine.size());
}

void Communicator::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !busy_); });
    if (stopping_) break;
    Task next = std::move(queue_.front());
    queue_.pop_front();
    run_as_the_runner(lock, &next, 1);
  }
  for (auto& task : queue_) {
    task.state->finish(
        {}, std::make_exception_ptr(Error("lockstep: " + task.call.describe() + " was cancelled by shutdown")));
  }
  queue_.clear();
}

Communicator::TaskResult Communicator::execute(Task& task) {
  const auto started = coarse_now();
  detail::CallObserver* observer = detail::call_observer();
  const double started_us = observer != nullptr && observer->watching() ? observer->now_us(timeline_rank_) : 0;
  {
    std::lock_guard<std::mutex> lock(running_mutex_);
    running_call_ = &task.call;
    running_since_ = started;
  }
  TaskResult result;
  std::exception_ptr& error = result.error;
  try {
    c10::NoGradGuard no_grad;  // collectives write into parameters and are not differentiated
    result.outputs = task.body(task.call);
  } catch (const MismatchError&) {
    error = std::current_exception();  // found before any data moved: the group stays usable
  } catch (const CallRefused&) {
    error = std::current_exception();  // likewise
  } catch (const CallsDiffer&) {
    error = aborted_error(task.call);  // after an abort the others, asked how calls differ, would not answer
    if (!error) {
      try {
        error = std::make_exception_ptr(MismatchError(how_calls_differ(task.call)));
      } catch (const std::exception& e) {
        error = std::current_exception();
        mark_failed(e.what());
      }
    }
  } catch (const Error& e) {
    error = std::current_exception();
    mark_failed(e.what());
  } catch (const std::exception& failure) {
    // Whatever the transport said as it gave up (gloo: "connection closed"), the cause is the
    // abort's; and the others, asked, would not answer.
    error = aborted_error(task.call);
    if (!error) error = explain_failure(task.call, failure, std::chrono::steady_clock::now() - started);
    mark_failed(failure.what());
  }
  if (error) wait_if_the_job_is_ending();  // the watchdog reports the failure that ended it
  {
    std::lock_guard<std::mutex> lock(running_mutex_);
    running_call_ = nullptr;
  }
  if (started_us > 0 && observer->watching()) tell_observer(*observer, task, started_us, error);
  return result;
}

void Communicator::tell_observer(detail::CallObserver& observer, const Task& task, double started_us,
                                 const std::exception_ptr& error) const {
  const double ended_us = observer.now_us(timeline_rank_);
  detail::CallSeen seen{task.call,      timeline_rank_, timeline_group_, transport_name(),
                        task.queued_us, started_us,     ended_us,        nullptr};
  if (task.device_call) seen.on_device = task.device_call->device_span();
  if (!error) return observer.call_ended(seen);
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    detail::CallSeen failed = seen;
    failed.error = &e;
    observer.call_ended(failed);
  }
}

void Communicator::name_for_timeline(int world_rank, std::string group_name) {
  timeline_rank_ = world_rank;
  timeline_group_ = std::move(group_name);
}

uint64_t Communicator::collectives_called() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_seq_;
}

bool Communicator::has_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failure_.empty();
}

void Communicator::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.empty()) aborted_ = why;
  }
  mark_failed(why);
  host_->abort(why);
  for (const auto& [type, device] : devices_) device->abort();
}

std::exception_ptr Communicator::aborted_error(const Call& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.empty()) return nullptr;
  return std::make_exception_ptr(
      Error("lockstep: rank " + std::to_string(rank_) + ": " + call.describe() + " was aborted: " + aborted_));
}

void Communicator::mark_failed(const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty()) failure_ = what;
}

std::optional<std::pair<std::string, std::chrono::steady_clock::duration>> Communicator::running() const {
  std::lock_guard<std::mutex> lock(running_mutex_);
  if (!running_call_) return std::nullopt;
  return std::make_pair(running_call_->describe(), std::chrono::steady_clock::now() - running_since_);
}

// ---- mismatch checks and failure messages ----

void Communicator::check_same_call(const Call& call, const Transport& moving) {
  if (!debug_) {
    // A device transport's calls are compared only in debug mode: an exchange over the host
    // before each would cost a round trip per call (the watchdog names them otherwise).
    if (&moving != host_.get() || !host_->checks_every_call(call) ||
        host_->same_fingerprint_everywhere(call.fingerprint())) {
      return;
    }
  }
  const std::string differ = how_calls_differ(call);
  if (!differ.empty()) throw MismatchError(differ);
}

std::string Communicator::how_calls_differ(const Call& call) {
  CallSummary mine{};
  mine.fingerprint = call.fingerprint();
  std::strncpy(mine.text, call.describe().c_str(), sizeof(mine.text) - 1);
  std::vector<CallSummary> all(world_size_);
  // The tag depends on the sequence number only: the calls being compared may differ.
  const uint32_t tag = tag_of(ReservedTag::HowCallsDiffer) | (static_cast<uint32_t>(call.seq) & ~kFirstReservedTag);
  host_->all_gather_bytes(&mine, all.data(), sizeof(CallSummary), tag);
  const bool same =
      std::all_of(all.begin(), all.end(), [&](const CallSummary& s) { return s.fingerprint == mine.fingerprint; });
  if (same) return "";
  std::ostringstream message;
  message << "lockstep: ranks called different collectives (every rank must pass the same "
             "shapes, dtypes, ops and roots, in the same order):";
  for (int r = 0; r < world_size_; ++r) message << "\n  rank " << r << ": " << all[r].text;
  return message.str();
}

std::exception_ptr Communicator::explain_failure(const Call& call, const std::exception& failure,
                                                 std::chrono::steady_clock::duration elapsed) {
  if (auto explained = host_->explain_failure(call, failure, elapsed, timeout_)) {
    return explained;
  }
  const std::string message =
      "lockstep: rank " + std::to_string(rank_) + ": " + call.describe() + " failed: " + failure.what();
  if (elapsed >= timeout_) return std::make_exception_ptr(TimeoutError(message));
  return std::make_exception_ptr(Error(message));
}

}  // namespace lockstep
