// Replicas as threads of one process (run_replicas): exact collectives through process
// memory, the replica's default group, per-replica state, and failures that end every
// replica at once. Also built and run under ThreadSanitizer (make test-tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <pthread.h>
#include <sched.h>

#include "comm/sixteen_bit_means.h"
#include "job/cpu_topology.h"
#include "lockstep/lockstep.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using torch::Tensor;

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every collective on rank-dependent inputs, small (one cache line per rank or less) and
// large (many slices), against values worked out by hand.
void expect_exact_collectives(int n, int64_t length) {
  std::vector<std::string> wrong(n);
  run_replicas(n, [&](ProcessGroup group) {
    const int r = group.rank();
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) wrong[r] += what + "; ";
    };
    const double sum_ranks = n * (n - 1) / 2.0;
    for (auto dtype : {torch::kFloat, torch::kDouble, torch::kInt, torch::kLong, torch::kHalf, torch::kBFloat16}) {
      Tensor t = torch::arange(length, torch::kDouble).fmod(7).add(r).to(dtype);
      all_reduce(t);
      const Tensor base = torch::arange(length, torch::kDouble).fmod(7);
      check(t.to(torch::kDouble).equal(base * n + sum_ranks), "all_reduce Sum " + std::string(c10::toString(dtype)));
      Tensor m = torch::full({length}, r, dtype);
      all_reduce(m, ReduceOp::Max);
      check(m.to(torch::kDouble).equal(torch::full({length}, n - 1.0, torch::kDouble)), "all_reduce Max");
    }
    Tensor avg = torch::full({length}, 2.0 * r);
    all_reduce(avg, ReduceOp::Avg);
    check(avg.equal(torch::full({length}, static_cast<float>(n - 1))), "all_reduce Avg");

    Tensor b = torch::full({length}, r == n - 1 ? 42.0 : -1.0);
    broadcast(b, n - 1);
    check(b.equal(torch::full({length}, 42.0f)), "broadcast");

    Tensor red = torch::full({length}, r + 1.0);
    reduce(red, 0, ReduceOp::Product);
    double factorial = 1;
    for (int q = 1; q <= n; ++q) factorial *= q;
    check(red.equal(torch::full({length}, r == 0 ? factorial : r + 1.0)), "reduce Product");

    const auto gathered = all_gather(torch::full({length}, r * 10.0));
    check(static_cast<int>(gathered.size()) == n, "all_gather size");
    for (int q = 0; q < n && q < static_cast<int>(gathered.size()); ++q) {
      check(gathered[q].equal(torch::full({length}, q * 10.0f)), "all_gather part " + std::to_string(q));
    }

    const Tensor scattered = reduce_scatter(torch::arange(n * length, torch::kDouble).add(r));
    check(scattered.equal(torch::arange(r * length, (r + 1) * length, torch::kDouble) * n + sum_ranks),
          "reduce_scatter");

    // Each range's sum in its owner's tensor alone: the others' keep their input.
    const Tensor input = torch::arange(length, torch::kDouble).fmod(7).add(r);
    const Tensor reduced = torch::arange(length, torch::kDouble).fmod(7) * n + sum_ranks;
    const std::vector<OwnedRange> ranges{{length / 3, kEveryRank}, {2 * length / 3, 0}, {length, n - 1}};
    Tensor owned = input.clone();
    reduce_to_owners(owned, ranges);
    int64_t begin = 0;
    for (const auto& range : ranges) {
      const bool needed = range.owner == kEveryRank || range.owner == r;
      check(owned.slice(0, begin, range.end).equal((needed ? reduced : input).slice(0, begin, range.end)),
            "reduce_to_owners range ending at " + std::to_string(range.end));
      begin = range.end;
    }

    std::vector<Tensor> many{torch::full({3}, r + 0.0), torch::full({length}, r, torch::kLong)};
    all_reduce(many);
    check(many[0].equal(torch::full({3}, static_cast<float>(sum_ranks))) &&
              many[1].equal(torch::full({length}, static_cast<int64_t>(sum_ranks), torch::kLong)),
          "coalesced all_reduce");
    barrier();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[r], "") << "replica " << r << " of " << n;
}

// Thread replicas' twin of the SixteenBitMeans tests over processes.
TEST(Replicas, SixteenBitMeansAreCorrectlyRoundedWhereTheSumOverflows) {
  for (const int n : {2, 3}) {
    std::vector<std::vector<std::string>> wrong(n);
    run_replicas(n, [&](ProcessGroup group) { wrong[group.rank()] = testing::check_16_bit_means(group); });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(wrong[r].empty()) << n << " replicas, rank " << r << ": " << wrong[r].front();
    }
  }
}

TEST(Replicas, CollectivesAreExactForOneToFourReplicas) {
  for (int n = 1; n <= 4; ++n) {
    expect_exact_collectives(n, 5);
    expect_exact_collectives(n, 100003);
  }
}

TEST(Replicas, TheReplicasGroupIsTheDefaultOnTheirThreads) {
  std::mutex mutex;
  std::vector<std::string> seen;
  run_replicas(3, [&](ProcessGroup group) {
    const std::string line =
        std::to_string(rank()) + "/" + std::to_string(world_size()) + " local " + std::to_string(local_rank()) + "/" +
        std::to_string(local_world_size()) + " " + to_string(backend()) + " " + ProcessGroup().transport() + " " +
        (is_initialized() ? "initialized" : "not") + " " + (group.rank() == rank() ? "same" : "different");
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(line);
  });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"0/3 local 0/3 threads threads initialized same",
                                            "1/3 local 1/3 threads threads initialized same",
                                            "2/3 local 2/3 threads threads initialized same"}));
  EXPECT_FALSE(is_initialized());  // the caller's thread is no replica
}

TEST(Replicas, InitAndShutdownOnAReplicaAreRefused) {
  const std::string error = message_of([] { run_replicas(2, [](ProcessGroup) { init(); }); });
  EXPECT_TRUE(contains(error, "lockstep::init() was called on replica ")) << error;
  EXPECT_TRUE(contains(error, "leave the call out of the body")) << error;
}

TEST(Replicas, SubGroupsAndAsyncWorkRunBesideTheDefaultGroup) {
  std::vector<std::string> wrong(4);
  run_replicas(4, [&](ProcessGroup group) {
    const int r = group.rank();
    const ProcessGroup low = new_group({0, 1});  // every replica makes every group
    const ProcessGroup high = new_group({2, 3});
    const ProcessGroup evens = new_group({0, 2});
    const ProcessGroup& pair = r < 2 ? low : high;
    if (evens.is_member() != (r % 2 == 0)) wrong[r] += "evens membership; ";
    Tensor in_pair = torch::full({1000}, r + 1.0);
    Work pair_work = all_reduce_async(in_pair, ReduceOp::Sum, pair);
    Tensor everyone = torch::full({10}, 1.0);
    all_reduce(everyone);
    pair_work.wait();
    const double pair_sum = r < 2 ? 3.0 : 7.0;
    if (!in_pair.equal(torch::full({1000}, pair_sum))) wrong[r] += "pair sum; ";
    if (!everyone.equal(torch::full({10}, 4.0))) wrong[r] += "world sum; ";
    if (evens.is_member()) {
      Tensor t = torch::full({3}, r + 0.0);
      all_reduce(t, ReduceOp::Sum, evens);
      if (!t.equal(torch::full({3}, 2.0))) wrong[r] += "evens sum; ";
      if (evens.ranks() != std::vector<int>{0, 2}) wrong[r] += "evens ranks; ";
    }
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(wrong[r], "") << "replica " << r;
}

// Each group numbers its own collectives; a rank outside a group is told it is not a member.
TEST(Replicas, EachGroupCountsTheCollectivesCalledOnIt) {
  std::vector<std::string> wrong(3);
  run_replicas(3, [&](ProcessGroup group) {
    const int r = group.rank();
    const ProcessGroup pair = new_group({0, 1});
    const uint64_t before = group.collectives_called();
    Tensor t = torch::ones({4});
    all_reduce(t);
    broadcast(t, 0);
    if (group.collectives_called() != before + 2) wrong[r] += "default group count; ";
    if (pair.is_member()) {
      if (pair.collectives_called() != 0) wrong[r] += "a new group starts at 0; ";
      all_reduce(t, ReduceOp::Sum, pair);
      if (pair.collectives_called() != 1) wrong[r] += "pair count; ";
      if (group.collectives_called() != before + 2) wrong[r] += "the pair's call counted on the default group; ";
    } else {
      try {
        pair.collectives_called();
        wrong[r] += "no error outside the group; ";
      } catch (const Error& e) {
        if (std::string(e.what()).find("is not a member of the group of ranks") == std::string::npos)
          wrong[r] += e.what();
      }
    }
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(wrong[r], "") << "replica " << r;
}

TEST(Replicas, MismatchedCallsNameEachReplicasCallAndTheGroupGoesOn) {
  std::vector<std::string> errors(2);
  std::vector<int> after(2);
  run_replicas(2, [&](ProcessGroup group) {
    Tensor t = torch::ones({group.rank() == 0 ? 3 : 4});
    try {
      all_reduce(t);
    } catch (const MismatchError& e) {
      errors[group.rank()] = e.what();
    }
    Tensor u = torch::ones({2});
    all_reduce(u);
    after[group.rank()] = u.equal(torch::full({2}, 2.0f));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(errors[r], "rank 0: all_reduce #0 (float32[3], Sum)")) << errors[r];
    EXPECT_TRUE(contains(errors[r], "rank 1: all_reduce #0 (float32[4], Sum)")) << errors[r];
    EXPECT_TRUE(after[r]);
  }
}

TEST(Replicas, OneThatThrowsMidCollectiveEndsEveryReplicaWithinOneSecond) {
  for (int failing : {0, 2}) {
    const auto start = std::chrono::steady_clock::now();
    int replica = -1;
    std::string what;
    try {
      run_replicas(3, [&](ProcessGroup group) {
        Tensor t = torch::ones({1 << 16});
        all_reduce(t);  // all three, so the failure comes mid-run
        if (group.rank() == failing) {
          std::this_thread::sleep_for(50ms);  // the others are waiting in the next collective
          throw std::runtime_error("bad batch 17");
        }
        for (int k = 0; k < 3; ++k) all_reduce(t);
      });
    } catch (const ReplicaError& e) {
      replica = e.replica();
      what = e.what();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(replica, failing);
    EXPECT_EQ(what, "lockstep::run_replicas: replica " + std::to_string(failing) + " failed: bad batch 17");
    EXPECT_LT(seconds, 1.0);
  }
}

TEST(Replicas, OneThatReturnsEarlyIsNamedByTheOthers) {
  const std::string error = message_of([] {
    run_replicas(2, [](ProcessGroup group) {
      if (group.rank() == 1) return;
      Tensor t = torch::ones({4});
      all_reduce(t);
    });
  });
  EXPECT_TRUE(contains(error, "replica 0 failed: ")) << error;
  EXPECT_TRUE(contains(error, "rank 1 returned from its body while this rank waited for it")) << error;
}

TEST(Replicas, AHangingReplicaTimesOut) {
  const auto start = std::chrono::steady_clock::now();
  const std::string error = message_of([] {
    run_replicas(
        2,
        [](ProcessGroup group) {
          if (group.rank() == 1) std::this_thread::sleep_for(1500ms);
          Tensor t = torch::ones({4});
          all_reduce(t);
        },
        ReplicaOptions().timeout(500ms));
  });
  EXPECT_TRUE(contains(error, "replica 0 failed: ")) << error;
  EXPECT_TRUE(contains(error, "timed out")) << error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Replicas, StartWithTheCallersGradModeAndAShareOfItsThreads) {
  const int caller_threads = at::get_num_threads();
  std::vector<int> grad(2), threads(2);
  {
    torch::NoGradGuard no_grad;
    run_replicas(2, [&](ProcessGroup group) {
      grad[group.rank()] = torch::GradMode::is_enabled();
      threads[group.rank()] = at::get_num_threads();
    });
  }
  EXPECT_EQ(grad, (std::vector<int>{0, 0}));
  EXPECT_EQ(threads, (std::vector<int>(2, std::max(1, caller_threads / 2))));
  run_replicas(
      2,
      [&](ProcessGroup group) {
        grad[group.rank()] = torch::GradMode::is_enabled();
        threads[group.rank()] = at::get_num_threads();
      },
      ReplicaOptions().threads(3));
  EXPECT_EQ(grad, (std::vector<int>{1, 1}));
  EXPECT_EQ(threads, (std::vector<int>{3, 3}));
  EXPECT_EQ(at::get_num_threads(), caller_threads);
}

TEST(Replicas, EachHasItsOwnRandomStreamAsAFreshProcessWould) {
  // What a fresh process draws, unseeded and then seeded.
  const Tensor unseeded = at::detail::createCPUGenerator().get_state();
  torch::manual_seed(7);
  const Tensor seven = torch::rand({5});
  const Tensor seven_next = torch::rand({5});
  torch::manual_seed(123);
  const Tensor callers_next = torch::rand({3});
  torch::manual_seed(123);

  std::vector<Tensor> first(3), second(3), fresh(3);
  run_replicas(3, [&](ProcessGroup group) {
    const int r = group.rank();
    with_replica_generator([&] { fresh[r] = at::detail::getDefaultCPUGenerator().get_state(); });
    with_replica_generator([&] {
      torch::manual_seed(7);
      first[r] = torch::rand({5});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * r));
    with_replica_generator([&] { second[r] = torch::rand({5}); });  // carries on from the first
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(fresh[r].equal(unseeded)) << r;
    EXPECT_TRUE(first[r].equal(seven)) << r;
    EXPECT_TRUE(second[r].equal(seven_next)) << r;
  }
  EXPECT_TRUE(torch::rand({3}).equal(callers_next));  // the caller's stream is untouched
}

TEST(Replicas, BadArgumentsAreRefused) {
  EXPECT_EQ(message_of([] { run_replicas(0, [](ProcessGroup) {}); }),
            "lockstep::run_replicas: n must be at least 1, got 0");
  EXPECT_EQ(message_of([] { init(InitOptions().backend(Backend::Threads)); }),
            "lockstep::init: Backend::Threads is the backend of lockstep::run_replicas, which makes its "
            "own group; init() takes Backend::Gloo, Mpi or Auto");
}

// Each replica thread's CPUs, by rank, with `options`.
std::vector<std::vector<int>> replica_cpus(const ReplicaOptions& options) {
  std::vector<std::vector<int>> cpus(2);
  run_replicas(
      2,
      [&](ProcessGroup group) {
        cpu_set_t set;
        CPU_ZERO(&set);
        pthread_getaffinity_np(pthread_self(), sizeof set, &set);
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
          if (CPU_ISSET(cpu, &set)) cpus[group.rank()].push_back(cpu);
        }
      },
      options);
  return cpus;
}

TEST(Replicas, BindCoresGivesEachReplicaThreadAPhysicalCoreOfItsOwn) {
  const std::vector<int> mine = allowed_cpus();
  EXPECT_EQ(replica_cpus(ReplicaOptions()), std::vector<std::vector<int>>(2, mine)) << "pinned unasked";
  const CoreBinding fits = bind_to_cores(2, mine);
  if (fits.cpus.empty()) GTEST_SKIP() << fits.unbound_why;
  const auto bound = replica_cpus(ReplicaOptions().bind_cores(true));
  ASSERT_EQ(bound[0].size(), 1u);
  ASSERT_EQ(bound[1].size(), 1u);
  EXPECT_NE(physical_core_of(bound[0][0]), physical_core_of(bound[1][0]));
  // The caller's own thread keeps its CPUs.
  EXPECT_EQ(allowed_cpus(), mine);
}

}  // namespace
}  // namespace lockstep
