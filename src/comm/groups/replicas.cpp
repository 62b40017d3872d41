#include "lockstep/comm/replicas.h"

#include <pthread.h>
#include <sched.h>

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include "comm/groups/call_observer.h"
#include "comm/groups/process_group.h"
#include "job/cpu_topology.h"
#include "comm/world/replica_world.h"

namespace lockstep {
namespace {

thread_local detail::ReplicaContext* this_threads_replica = nullptr;

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// Groups that outlive their replica (a handle kept past the body) refuse later calls.
void close_groups(detail::ReplicaContext& replica) {
  for (auto& weak : replica.sub_groups) {
    if (auto group = weak.lock(); group && group->communicator) group->communicator->close();
  }
  if (replica.group && replica.group->communicator) replica.group->communicator->close();
}

// One replica, on its own thread: its context in place of init()'s group, then the body.
// Returns the body's error, if any, after telling the other replicas.
std::exception_ptr run_replica(int index, const std::shared_ptr<ReplicaSet>& replicas,
                               const std::function<void(ProcessGroup)>& body, const ReplicaOptions& options,
                               const at::ThreadLocalState& caller, const at::Tensor& fresh_random_state, int threads) {
  // Grad mode and the like are thread-local in ATen: a new thread would start from defaults.
  at::ThreadLocalStateGuard caller_state(caller);
  at::set_num_threads(threads);
  detail::ReplicaContext replica;
  replica.index = index;
  replica.random_state = fresh_random_state.clone();
  this_threads_replica = &replica;
  std::exception_ptr error;
  try {
    replica.group = detail::make_world_group(std::make_shared<ReplicaWorld>(replicas, index, options.debug()));
    detail::CallObserver* observer = detail::call_observer();
    if (observer != nullptr) observer->joined(replica.group->world->spec());
    body(ProcessGroup(replica.group));
    if (observer != nullptr) observer->leaving();
    replicas->finish(index);
  } catch (...) {
    error = std::current_exception();
    replicas->fail(index);
  }
  close_groups(replica);
  this_threads_replica = nullptr;
  return error;
}

// Replicas allocate and free each step's tensors on several threads, so glibc serves them
// from per-thread arenas, which hand freed memory back to the system as soon as their top is
// free and fault it in again the next step: 4-10% of a small CNN's step (bench/ddp_cnn).
// Keeping 64 MB at the top of each arena avoids it. A MALLOC_TOP_PAD_ the user set wins.
void keep_freed_memory_for_the_next_step() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("MALLOC_TOP_PAD_") == nullptr) mallopt(M_TOP_PAD, 64 << 20);
  });
#endif
}

}  // namespace

namespace detail {

ReplicaContext* current_replica() { return this_threads_replica; }

}  // namespace detail

ReplicaError::ReplicaError(int replica, const std::string& what)
    : Error("lockstep::run_replicas: replica " + std::to_string(replica) + " failed: " + what),
      replica_(replica),
      reason_(what) {}

void run_replicas(int n, const std::function<void(ProcessGroup group)>& body, const ReplicaOptions& options) {
  if (n < 1) throw ConfigError("lockstep::run_replicas: n must be at least 1, got " + std::to_string(n));
  if (options.threads() < 0) {
    throw ConfigError("lockstep::run_replicas: ReplicaOptions.threads must not be negative, got " +
                      std::to_string(options.threads()));
  }
  const int caller_threads = at::get_num_threads();
  const int threads = options.threads() > 0 ? options.threads() : std::max(1, caller_threads / n);
  const at::ThreadLocalState caller;
  const at::Tensor fresh_random_state = at::detail::createCPUGenerator().get_state();
  keep_freed_memory_for_the_next_step();
  // libtorch makes a thread pool of its own on the first set_num_threads: here, not in
  // whichever replica's thread comes first. Its once-only start is right either way, but
  // ThreadSanitizer cannot see the atomics it is made of in an uninstrumented libtorch and
  // named a lock in it as raced (make test-tsan, 2026-11-29).
  at::set_num_threads(caller_threads);
  auto replicas = std::make_shared<ReplicaSet>(n, options.timeout());
  std::vector<std::exception_ptr> errors(n);
  const CoreBinding binding = options.bind_cores() ? bind_to_cores(n, allowed_cpus()) : CoreBinding();
  std::vector<std::thread> running;
  for (int r = 0; r < n; ++r) {
    running.emplace_back([&, r] {
      if (!binding.cpus.empty()) {
        cpu_set_t own;
        CPU_ZERO(&own);
        CPU_SET(binding.cpus[r], &own);
        pthread_setaffinity_np(pthread_self(), sizeof own, &own);
      }
      errors[r] = run_replica(r, replicas, body, options, caller, fresh_random_state, threads);
    });
  }
  for (auto& thread : running) thread.join();
  // The replicas set the process-wide count that new threads start from; put it back.
  at::set_num_threads(caller_threads);
  if (const int first = replicas->first_failed(); first >= 0) {
    throw ReplicaError(first, message_of(errors[first]));
  }
}

void with_replica_generator(const std::function<void()>& body) {
  detail::ReplicaContext* replica = detail::current_replica();
  if (replica == nullptr) return body();
  // The process has one default generator, so one replica at a time may hold it.
  static std::mutex turns;
  std::lock_guard<std::mutex> turn(turns);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor outside;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    outside = generator.get_state();
    generator.set_state(replica->random_state);
  }
  auto give_back = [&] {
    std::lock_guard<std::mutex> lock(generator.mutex());
    replica->random_state = generator.get_state();
    generator.set_state(outside);
  };
  try {
    body();
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
}

}  // namespace lockstep
