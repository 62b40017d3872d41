#include "ddp/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <sstream>

#include <ATen/ATen.h>
// The autograd engine's end-of-backward callback: the one hook libtorch's public API lacks,
// and what lets backward() return with every gradient reduced, no finish call to forget.
#include <torch/csrc/autograd/engine.h>

#include "comm/groups/communicator.h"
#include "comm/groups/process_group.h"
#include "ddp/bucket_assigner.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "timeline/recorder.h"

namespace lockstep {

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, std::vector<std::string> names, Options options)
    : parameters_(std::move(parameters)), names_(std::move(names)), options_(std::move(options)) {
  for (size_t i = parameters_.size(); i-- > 0;) {
    if (parameters_[i].requires_grad()) trained_.push_back(i);  // reverse registration order
  }
  group_rank_ = options_.group.rank();
  timeline_rank_ = options_.group.ranks().at(group_rank_);
  device_times_.emplace(trained_.empty() ? at::Device(at::kCPU) : parameters_[trained_.front()].device(),
                        timeline_rank_);
  location_.resize(parameters_.size());
  ready_.assign(parameters_.size(), 0);
  set_aside_.resize(parameters_.size());
  aliased_.assign(parameters_.size(), 0);
  unused_before_.resize(parameters_.size());
  build_buckets(trained_);
  for (size_t i : trained_) {
    hook_handles_.push_back(
        parameters_[i].register_hook([this, i](const at::Tensor& grad) { return on_gradient(i, grad); }));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < trained_.size(); ++k) parameters_[trained_[k]].remove_hook(hook_handles_[k]);
}

std::vector<std::vector<size_t>> GradientReducer::buckets() const {
  std::vector<std::vector<size_t>> members;
  for (const auto& bucket : buckets_) members.push_back(bucket.members);
  return members;
}

namespace {

// 16-bit gradients are bucketed in float32: scaled and summed there, they are rounded once,
// into grad(), and a sum of many ranks' gradients cannot overflow float16 on the way.
at::ScalarType bucket_dtype(const at::Tensor& parameter) {
  const at::ScalarType dtype = parameter.scalar_type();
  return dtype == at::kHalf || dtype == at::kBFloat16 ? at::kFloat : dtype;
}

// Gradients that are contiguous float32 or float64 CPU tensors of the bucket's dtype move
// in and out of it in plain loops: the same bits as add_out, copy_ and mul_, without the
// dispatch that costs more than the bytes for the small gradients of latency-bound models
// (three calls per parameter per step; issue 24).
bool plain_cpu(const at::Tensor& t, at::ScalarType dtype) {
  return t.device().is_cpu() && t.layout() == at::kStrided && t.scalar_type() == dtype &&
         (dtype == at::kFloat || dtype == at::kDouble) && t.is_contiguous();
}

// out = (so_far + grad) * scale, or grad * scale while so_far is undefined.
template <typename T>
void sum_and_scale(at::Tensor& out, const at::Tensor& so_far, const at::Tensor& grad, double scale) {
  T* o = out.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const T s = static_cast<T>(scale);  // as mul_ applies a double to a float tensor
  const int64_t n = out.numel();
  if (so_far.defined()) {
    const T* a = so_far.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = (a[i] + g[i]) * s;
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = g[i] * s;
  }
}

// Into a bucket's view: (so_far + grad) * scale, or grad * scale while grad() is undefined.
void bucket_gradient(at::Tensor& view, const at::Tensor& so_far, const at::Tensor& grad, double scale) {
  const at::ScalarType dtype = view.scalar_type();
  const bool plain =
      plain_cpu(view, dtype) && plain_cpu(grad, dtype) && (!so_far.defined() || plain_cpu(so_far, dtype));
  if (!plain) {
    if (so_far.defined()) {
      at::add_out(view, so_far, grad);
      if (scale != 1.0) view.mul_(scale);
    } else if (scale != 1.0 && grad.scalar_type() == dtype) {
      // One kernel, not copy_ then mul_ (on a GPU, a launch per gradient saved), with their
      // bits: the scale as a 0-dimensional CPU tensor of the bucket's dtype is what mul_
      // turns its double into.
      at::mul_out(view, grad, at::scalar_tensor(scale, at::TensorOptions().dtype(dtype)));
    } else {
      view.copy_(grad);  // a 16-bit gradient into float32: exact, then scaled there
      if (scale != 1.0) view.mul_(scale);
    }
  } else if (dtype == at::kFloat) {
    sum_and_scale<float>(view, so_far, grad, scale);
  } else {
    sum_and_scale<double>(view, so_far, grad, scale);
  }
}

// grad() = the reduced view.
void write_gradient(at::Tensor& grad, const at::Tensor& view) {
  if (!plain_cpu(grad, view.scalar_type()) || !plain_cpu(view, view.scalar_type())) {
    grad.copy_(view);
    return;
  }
  std::memcpy(grad.data_ptr(), view.data_ptr(), view.nbytes());
  grad.unsafeGetTensorImpl()->bump_version();  // as copy_ would: autograd sees the write
}

// A tensor over `buffer`'s elements from `offset` on, shaped `sizes`, that autograd does not
// take for a view of it (narrow() and view() would make one): with gradient_as_bucket_view it
// is grad(), which must survive libtorch's Optimizer::zero_grad() and its detach_(), refused
// on views.
at::Tensor part_of(const at::Tensor& buffer, int64_t offset, at::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(sizes[d], 1);
  at::Tensor part = at::empty({0}, buffer.options());
  part.set_(buffer.storage(), buffer.storage_offset() + offset, sizes, strides);
  return part;
}

// A tensor of its own over `view`'s elements, made without a dispatched op: detach() would
// cost a latency-bound step about half a microsecond per parameter.
at::Tensor alias_of(const at::Tensor& view) {
  return at::Tensor(view.getIntrusivePtr()->shallow_copy_and_detach(c10::VariableVersion(0),
                                                                    /*allow_tensor_metadata_change=*/false));
}

}  // namespace

void GradientReducer::build_buckets(const std::vector<size_t>& order) {
  std::vector<ParameterSize> sizes;
  for (size_t i : order) {
    const at::ScalarType dtype = bucket_dtype(parameters_[i]);
    sizes.push_back({i, parameters_[i].numel() * static_cast<int64_t>(at::elementSize(dtype)), dtype});
  }
  buckets_.clear();
  for (auto& members : assign_buckets(sizes, options_.first_bucket_bytes, bucket_cap())) {
    Bucket bucket;
    for (size_t slot = 0; slot < members.size(); ++slot) {
      location_[members[slot]] = {buckets_.size(), slot};
      bucket.numel += parameters_[members[slot]].numel();
    }
    bucket.members = std::move(members);
    if (shards_gradients()) bucket.owners = owned_ranges(bucket.members);
    if (!shards_gradients()) lay_out(bucket, new_buffer(bucket));
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i : order) {
    if (lives_in_bucket(i)) move_gradient_into_bucket(i);
  }
  make_turns();
}

void GradientReducer::lay_out(Bucket& bucket, at::Tensor buffer) {
  bucket.buffer = std::move(buffer);
  bucket.views.clear();
  int64_t offset = 0;
  for (size_t i : bucket.members) {
    bucket.views.push_back(part_of(bucket.buffer, offset, parameters_[i].sizes()));
    offset += parameters_[i].numel();
  }
}

at::Tensor GradientReducer::new_buffer(const Bucket& bucket) {
  const at::Tensor& first = parameters_[bucket.members.front()];
  const at::ScalarType dtype = bucket_dtype(first);
  // In shared memory where the group has it: the bucket's all_reduce then copies nothing.
  // Not when gradients are sharded: such a buffer lives for one backward, and making shared
  // memory is a collective of its own.
  return first.device().is_cpu() && !shards_gradients()
             ? empty_shared({bucket.numel}, dtype, options_.group)
             : at::empty({bucket.numel}, first.options().dtype(dtype).requires_grad(false));
}

void GradientReducer::make_turns() {
  turns_.clear();
  // With find_unused_parameters a bucket cannot be written out before the end of backward,
  // when it is known which parameters no rank used.
  if (!shards_gradients() || options_.find_unused_parameters || buckets_.empty()) return;
  const at::ScalarType dtype = bucket_dtype(parameters_[buckets_.front().members.front()]);
  for (size_t i : trained_) {
    if (!parameters_[i].device().is_cpu() || bucket_dtype(parameters_[i]) != dtype) return;
  }
  turns_.resize(std::min<size_t>(2, buckets_.size()));
  for (size_t k = 0; k < turns_.size(); ++k) {
    int64_t numel = 0;
    for (size_t b = k; b < buckets_.size(); b += turns_.size()) numel = std::max(numel, buckets_[b].numel);
    turns_[k].buffer = empty_shared({numel}, dtype, options_.group);
  }
}

void GradientReducer::take_buffer(size_t b) {
  if (!turns_.empty() && turn_of(b).next == b) {
    Turn& turn = turn_of(b);
    if (turn.holder >= 0 && buckets_[turn.holder].reduced) {
      write_reduced_bucket(turn.holder, {});  // launched: waited for here, while the other turn's overlaps
    }
    if (turn.holder < 0) return enter_turn(b);
  }
  lay_out(buckets_[b], new_buffer(buckets_[b]));
}

void GradientReducer::enter_turn(size_t b) {
  Turn& turn = turn_of(b);
  turn.holder = static_cast<int64_t>(b);
  turn.next = b + turns_.size();
  lay_out(buckets_[b], part_of(turn.buffer, 0, {buckets_[b].numel}));
}

void GradientReducer::move_into_turn(size_t b) {
  Turn& turn = turn_of(b);
  if (turn.holder == static_cast<int64_t>(b)) return;
  // The buckets before it in its turn were launched before it, and entered the turn then.
  if (turn.holder >= 0) write_reduced_bucket(turn.holder, {});
  const at::Tensor filled = std::move(buckets_[b].buffer);
  enter_turn(b);
  buckets_[b].buffer.copy_(filled);
}

std::vector<OwnedRange> GradientReducer::owned_ranges(const std::vector<size_t>& members) const {
  std::vector<OwnedRange> ranges;
  int64_t end = 0;
  for (size_t i : members) {
    end += parameters_[i].numel();
    if (!ranges.empty() && ranges.back().owner == owners_[i]) {
      ranges.back().end = end;
    } else {
      ranges.push_back({end, owners_[i]});
    }
  }
  return ranges;
}

int64_t GradientReducer::bucket_cap() const {
  // Two buckets in their turns then hold what one of DDP's does: the memory a rank spends
  // beyond its share of the gradients (ResNet-50 on 3 ranks: 0.391x of DDP + Adam's
  // gradient and state bytes with whole buckets; bench/zero).
  return shards_gradients() && half_buckets_ ? options_.bucket_bytes / 2 : options_.bucket_bytes;
}

void GradientReducer::shard_gradients(std::vector<int> owners) {
  if (in_backward_) throw Error("lockstep::DistributedDataParallel::shard_gradients: called during backward");
  owners_ = std::move(owners);
  // Where an element's sum depends on where it lies in its bucket (an engine over three or
  // more ranks), ZeRO-2 keeps DDP's buckets: it then sums, and steps, DDP's bits.
  const at::Device device = trained_.empty() ? at::Device(at::kCPU) : parameters_[trained_.front()].device();
  half_buckets_ = communicator_of(options_.group, "shard_gradients").sums_independent_of_layout(device);
  // In the order they are in now (learned, or registration order before the first backward),
  // closing at bucket_cap(); buckets are taken for each backward from now on.
  std::vector<size_t> order;
  for (const auto& bucket : buckets_) order.insert(order.end(), bucket.members.begin(), bucket.members.end());
  build_buckets(order);
}

int64_t GradientReducer::bucket_bytes() const {
  int64_t bytes = 0;
  for (const auto& bucket : buckets_) {
    if (bucket.buffer.defined()) bytes += static_cast<int64_t>(bucket.buffer.nbytes());
  }
  for (const auto& turn : turns_) bytes += static_cast<int64_t>(turn.buffer.nbytes());
  return bytes;
}

bool GradientReducer::lives_in_bucket(size_t index) const {
  return options_.gradient_as_bucket_view && !shards_gradients() &&
         parameters_[index].scalar_type() == bucket_dtype(parameters_[index]);
}

void GradientReducer::move_gradient_into_bucket(size_t index) {
  auto [b, slot] = location_[index];
  const at::Tensor& view = buckets_[b].views[slot];
  at::Tensor& grad = parameters_[index].mutable_grad();
  if (grad.defined()) {
    if (grad.is_same(view)) return;
    view.copy_(grad);  // what an earlier bucket (before the rebuild) or the user left there
  }
  grad = view;
}

at::Tensor GradientReducer::on_gradient(size_t index, const at::Tensor& grad) {
  if (accumulating_) return {};  // no_sync(): autograd accumulates into grad() as usual
  if (!in_backward_) begin_backward();
  if (ready_[index]) {
    abandon_backward();
    throw Error("lockstep::DistributedDataParallel: parameter '" + names_[index] +
                "' received two gradients in one backward pass; reentrant backward is not supported");
  }
  auto [b, slot] = location_[index];
  Bucket& bucket = buckets_[b];
  if (!bucket.buffer.defined()) with_backward_abandoned_on_error([&] { take_buffer(b); });
  at::Tensor& view = bucket.views[slot];
  // The hook sees the gradient before autograd adds it to grad(); the bucket gets the sum,
  // which is what grad() will hold (more than this pass's gradient after no_sync()).
  at::Tensor& so_far = parameters_[index].mutable_grad();
  if (so_far.defined() && !so_far.sizes().equals(view.sizes())) {
    abandon_backward();
    throw Error("lockstep::DistributedDataParallel: grad() of parameter '" + names_[index] +
                "' was set to a tensor of shape " + c10::str(so_far.sizes()) + ", not the parameter's " +
                c10::str(view.sizes()) + "; assign gradients of the parameter's shape, or undefined ones");
  }
  bucket_gradient(view, so_far, grad, options_.scale);
  // Autograd's add into grad() would be overwritten unread: a dispatched add per parameter
  // and step, a few percent of a latency-bound step.
  if (so_far.defined()) set_aside_[index] = std::move(so_far);
  // Autograd stores an alias of the bucket instead of the gradient it computed, which is
  // freed now rather than kept to the end of backward, where the user's tensor takes the
  // reduced values: gradients then take no memory besides their buckets, and the next
  // gradients reuse the freed ones' memory (ResNet-18's step on 2 ranks took 2.2 times as
  // long when each was kept, bench/zero). Undefined, for a 16-bit parameter's float32
  // bucket: autograd stores its own.
  const bool alias = parameters_[index].scalar_type() == view.scalar_type();
  at::Tensor stored = alias ? alias_of(view) : at::Tensor();
  aliased_[index] = alias;
  ready_[index] = 1;
  if (!rebuilt_) arrival_order_.push_back(index);
  if (--bucket.pending == 0 || launch_deferred_) {
    hooked_bucket_ = b;
    with_backward_abandoned_on_error([&] { launch_ready_buckets(); });
    hooked_bucket_ = -1;
  }
  return stored;
}

void GradientReducer::begin_backward() {
  in_backward_ = true;
  waiting_ = false;  // also after a backward that threw
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(aliased_.begin(), aliased_.end(), 0);
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.members.size();
    bucket.reduced = nullptr;
    if (shards_gradients()) bucket.buffer = at::Tensor();  // also after a backward that threw
  }
  for (size_t k = 0; k < turns_.size(); ++k) turns_[k] = {turns_[k].buffer, -1, k};
  next_to_launch_ = 0;
  launch_deferred_ = false;
  arrival_order_.clear();
  torch::autograd::Engine::get_default_engine().queue_callback([this] { finish_backward(); });
}

void GradientReducer::launch_ready_buckets() {
  // Strictly in bucket order: every rank must issue the same collectives in the same order.
  launch_deferred_ = false;
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    const int64_t holder = turns_.empty() ? -1 : turn_of(next_to_launch_).holder;
    if (hooked_bucket_ >= 0 && holder == hooked_bucket_ && holder != static_cast<int64_t>(next_to_launch_)) {
      // Its turn's bucket is the one whose last gradient autograd is about to store: it is
      // written out, and this one launched, at the next gradient or the end of backward.
      launch_deferred_ = true;
      return;
    }
    Bucket& bucket = buckets_[next_to_launch_];
    const bool last = next_to_launch_ + 1 == buckets_.size();
    if (last) start_gradient_wait();
    if (!turns_.empty()) move_into_turn(next_to_launch_);
    GradBucket view{static_cast<int>(next_to_launch_), bucket.buffer, options_.group, last, bucket.owners};
    if (timeline::detail::on()) {
      bucket.launched_us = timeline::detail::now_us(timeline_rank_);
      bucket.launched_on_device = device_times_->bucket_launched();
    }
    bucket.reduced = options_.comm_hook(view);
    ++next_to_launch_;
  }
}

void GradientReducer::start_gradient_wait() {
  waiting_ = true;
  waiting_since_ = std::chrono::steady_clock::now();
  recording_wait_ = timeline::detail::on();
  if (recording_wait_) {
    namespace tl = timeline::detail;
    const double now_us = tl::now_us(timeline_rank_);
    tl::record(timeline_rank_, tl::Track::training, 'B', tl::event::kGradientWait, now_us);
    device_times_->wait_began(now_us);
  }
}

void GradientReducer::fill_missing_gradients() {
  size_t missing = 0;
  for (size_t i : trained_) {
    if (ready_[i]) continue;
    ++missing;
    if (!options_.find_unused_parameters) continue;
    // Unused here: it adds nothing to the sum, but its bucket must still travel.
    auto [b, slot] = location_[i];
    if (!buckets_[b].buffer.defined()) take_buffer(b);
    at::Tensor& view = buckets_[b].views[slot];
    if (parameters_[i].grad().is_same(view)) unused_before_[i] = view.clone();
    view.zero_();
    --buckets_[b].pending;
  }
  if (missing == 0 || options_.find_unused_parameters) return;
  std::ostringstream names;  // only now: building one costs a latency-bound step a microsecond
  size_t named = 0;
  for (size_t i : trained_) {
    if (!ready_[i] && named++ < 3) names << (named > 1 ? "', '" : "'") << names_[i];
  }
  throw Error("lockstep::DistributedDataParallel: " + std::to_string(missing) +
              " parameter(s) got no gradient in this backward pass (" + names.str() +
              "'); construct with DDPOptions().find_unused_parameters(true) if parts of the "
              "model are not used in every iteration");
}

void GradientReducer::abandon_backward() {
  in_backward_ = false;
  for (size_t i : trained_) {
    if (aliased_[i] || set_aside_[i].defined()) parameters_[i].mutable_grad() = std::move(set_aside_[i]);
    aliased_[i] = 0;
  }
}

void GradientReducer::finish_backward() {
  // Ends this backward however it leaves; when it throws, the user's grad() tensors not yet
  // written come back as they were.
  struct EndOfBackward {
    GradientReducer& reducer;
    const int exceptions = std::uncaught_exceptions();
    ~EndOfBackward() {
      if (std::uncaught_exceptions() == exceptions) {
        reducer.in_backward_ = false;
      } else {
        reducer.abandon_backward();
      }
    }
  } end_of_backward{*this};
  at::Tensor used;
  if (options_.find_unused_parameters) {
    used = at::tensor(std::vector<int>(ready_.begin(), ready_.end()), at::kInt);
  }
  fill_missing_gradients();
  launch_ready_buckets();
  if (used.defined()) {
    // Which parameters some rank used: those no rank used keep their grad() untouched,
    // exactly as in a single process. After every bucket, so all ranks queue it alike.
    all_reduce_async(used, ReduceOp::Max, options_.group).wait();
  }
  if (!waiting_) start_gradient_wait();  // no bucket at all
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b].reduced) write_reduced_bucket(b, used);  // not yet written out in its turn
  }
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting_since_).count();
  if (recording_wait_ && device_times_->timed()) {
    last_wait_seconds_ = device_times_->wait_ended();  // the host's wait is only queueing
  }
  waiting_ = false;
  if (recording_wait_) {
    namespace tl = timeline::detail;
    tl::record(timeline_rank_, tl::Track::training, 'E', tl::event::kGradientWait, tl::now_us(timeline_rank_));
  }
  if (!rebuilt_) rebuild_buckets_in_arrival_order();
  if (options_.after_backward) options_.after_backward();
}

void GradientReducer::write_reduced_bucket(size_t b, const at::Tensor& used) {
  namespace tl = timeline::detail;
  Bucket& bucket = buckets_[b];
  const at::Tensor reduced = bucket.reduced();
  if (recording_wait_) {
    // From ready to reduced, as this rank saw it: launched, then its future waited for (on
    // CUDA, as the device saw it).
    const int64_t bytes = bucket.buffer.numel() * static_cast<int64_t>(bucket.buffer.element_size());
    const auto parameters = static_cast<int64_t>(bucket.members.size());
    if (bucket.launched_on_device) {
      device_times_->bucket_written(b, bucket.launched_on_device, bucket.launched_us, bytes, parameters);
      bucket.launched_on_device.reset();
    } else {
      tl::record(timeline_rank_, tl::Track::buckets, 'X', tl::event::bucket(b), bucket.launched_us,
                 tl::now_us(timeline_rank_),
                 tl::Args()
                     .add(tl::key::kBucket, static_cast<int64_t>(b))
                     .add(tl::key::kBytes, bytes)
                     .add(tl::key::kParameters, parameters));
    }
  }
  if (!reduced.is_same(bucket.buffer)) bucket.buffer.copy_(reduced);
  for (size_t slot = 0; slot < bucket.members.size(); ++slot) {
    const size_t i = bucket.members[slot];
    const bool aliased = aliased_[i];  // grad() holds the alias autograd was handed
    aliased_[i] = 0;
    if (used.defined() && used.data_ptr<int>()[i] == 0) {
      // No rank used it: grad() stays what it was, as in one process.
      if (unused_before_[i].defined()) bucket.views[slot].copy_(unused_before_[i]);
      unused_before_[i] = at::Tensor();
      continue;
    }
    unused_before_[i] = at::Tensor();
    at::Tensor& grad = parameters_[i].mutable_grad();
    if (shards_gradients()) {
      // grad() holds the alias of the bucket autograd was handed; the user's tensor, if any,
      // was set aside.
      grad = keeps(i) ? std::move(set_aside_[i]) : at::Tensor();  // others' go with the bucket
      set_aside_[i] = at::Tensor();
      if (!keeps(i)) continue;
    }
    if (lives_in_bucket(i)) {
      set_aside_[i] = at::Tensor();  // the view itself, or a tensor the user had put there
      grad = bucket.views[slot];     // the reduced gradient where it was reduced: nothing copied
      continue;
    }
    if (aliased || set_aside_[i].defined()) grad = std::move(set_aside_[i]);  // the user's comes back
    if (grad.defined()) {
      write_gradient(grad, bucket.views[slot]);
    } else {
      grad = bucket.views[slot].to(parameters_[i].scalar_type(), /*non_blocking=*/false, /*copy=*/true);
    }
  }
  if (shards_gradients()) {
    bucket.buffer = at::Tensor();
    bucket.views.clear();
    bucket.reduced = nullptr;  // which may hold the buffer too
    if (!turns_.empty() && turn_of(b).holder == static_cast<int64_t>(b)) turn_of(b).holder = -1;
  }
}

void GradientReducer::rebuild_buckets_in_arrival_order() {
  // Buckets in the order gradients really arrive fill, and so launch, earlier. Ranks must
  // agree on them, so the root's observed order is everyone's.
  std::vector<int64_t> order(arrival_order_.begin(), arrival_order_.end());
  for (size_t i : trained_) {
    if (std::find(order.begin(), order.end(), static_cast<int64_t>(i)) == order.end()) order.push_back(i);
  }
  at::Tensor shared = at::tensor(order, at::kLong);
  broadcast(shared, options_.root, options_.group);
  const int64_t* root_order = shared.data_ptr<int64_t>();
  rebuild_buckets(std::vector<int64_t>(root_order, root_order + shared.numel()));
}

void GradientReducer::load_learned_order(const std::vector<int64_t>& order) {
  if (in_backward_) throw Error("lockstep::DistributedDataParallel::load_bucket_order: called during backward");
  std::vector<int64_t> expected(trained_.begin(), trained_.end());
  std::vector<int64_t> given = order;
  std::sort(expected.begin(), expected.end());
  std::sort(given.begin(), given.end());
  if (given != expected) {
    throw ConfigError("lockstep::DistributedDataParallel::load_bucket_order: the order of " +
                      std::to_string(order.size()) + " parameters is not one of this model's " +
                      std::to_string(trained_.size()) +
                      " parameters that need gradients; was it saved from another model?");
  }
  rebuild_buckets(order);
}

void GradientReducer::rebuild_buckets(const std::vector<int64_t>& order) {
  build_buckets(std::vector<size_t>(order.begin(), order.end()));
  learned_order_ = order;
  rebuilt_ = true;
}

}  // namespace lockstep
