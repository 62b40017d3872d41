// A worker the tests start as a real process (under the launcher, mpirun, or with a
// hand-made environment). Its first argument picks a scenario; it prints what went wrong
// and exits non-zero when anything does.
#include <algorithm>
#include <csignal>
#include <iostream>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "comm/groups/regroup.h"
#include "comm/sixteen_bit_means.h"
#include "lockstep/lockstep.h"

namespace {

using lockstep::ReduceOp;

const std::vector<torch::ScalarType> kDtypes = {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16,
                                                torch::kInt,   torch::kLong,   torch::kByte};
int failures = 0;

void expect_equal(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  if (got.scalar_type() == want.scalar_type() && got.sizes() == want.sizes() && torch::equal(got, want)) {
    return;
  }
  ++failures;
  std::cerr << "rank " << lockstep::rank() << ": " << what << " is wrong\n  got  "
            << got.to(torch::kDouble).flatten().slice(0, 0, 8) << "\n  want "
            << want.to(torch::kDouble).flatten().slice(0, 0, 8) << "\n";
}

// Every element's value on rank r is small and exact in every dtype; `i` varies it per
// element so that element-wise mistakes show.
torch::Tensor element_index(int64_t n) { return torch::arange(n, torch::kDouble); }

torch::Tensor input_for(int r, int n, int64_t numel, ReduceOp op) {
  const auto i = element_index(numel);
  switch (op) {
    case ReduceOp::Product: return (r + 1) + torch::remainder(i, 2);
    case ReduceOp::Min:
    case ReduceOp::Max: return torch::remainder(r + i, n) + 1 + torch::remainder(i, 4);
    default: return (r + 1) * (1 + torch::remainder(i, 4));
  }
}

torch::Tensor expected_reduction(int n, int64_t numel, ReduceOp op, torch::ScalarType dtype) {
  torch::Tensor acc = input_for(0, n, numel, op);
  for (int r = 1; r < n; ++r) {
    const auto x = input_for(r, n, numel, op);
    switch (op) {
      case ReduceOp::Product: acc = acc * x; break;
      case ReduceOp::Min: acc = torch::minimum(acc, x); break;
      case ReduceOp::Max: acc = torch::maximum(acc, x); break;
      default: acc = acc + x;
    }
  }
  if (op == ReduceOp::Avg) {
    acc = torch::isFloatingType(dtype) ? acc / n : torch::div(acc, n, "trunc");
  }
  return acc.to(dtype);
}

void check_all_reduce(int r, int n, torch::ScalarType dtype, int64_t numel) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product}) {
    const std::string what =
        "all_reduce(" + lockstep::to_string(op) + ", " + c10::toString(dtype) + ", " + std::to_string(numel) + ")";
    torch::Tensor t = input_for(r, n, numel, op).to(dtype);
    lockstep::all_reduce(t, op);
    expect_equal(t, expected_reduction(n, numel, op, dtype), what);

    torch::Tensor u = input_for(r, n, numel, op).to(dtype);
    lockstep::Work work = lockstep::all_reduce_async(u, op);
    work.wait();
    expect_equal(u, expected_reduction(n, numel, op, dtype), "async " + what);
    expect_equal(work.result().at(0), u, "result() of async " + what);
  }
}

void check_rooted(int r, int n, torch::ScalarType dtype) {
  const std::string type = c10::toString(dtype);
  for (int root = 0; root < n; ++root) {
    torch::Tensor t = input_for(r, n, 7, ReduceOp::Sum).to(dtype);
    lockstep::broadcast(t, root);
    expect_equal(t, input_for(root, n, 7, ReduceOp::Sum).to(dtype),
                 "broadcast(root " + std::to_string(root) + ", " + type + ")");

    torch::Tensor s = input_for(r, n, 7, ReduceOp::Max).to(dtype);
    lockstep::reduce(s, root, ReduceOp::Max);
    const auto want =
        r == root ? expected_reduction(n, 7, ReduceOp::Max, dtype) : input_for(r, n, 7, ReduceOp::Max).to(dtype);
    expect_equal(s, want, "reduce(root " + std::to_string(root) + ", Max, " + type + ")");

    torch::Tensor a = input_for(r, n, 5, ReduceOp::Sum).to(dtype);
    lockstep::reduce_async(a, root, ReduceOp::Avg).wait();
    if (r == root) {
      expect_equal(a, expected_reduction(n, 5, ReduceOp::Avg, dtype), "reduce_async(Avg, " + type + ")");
    }
  }
}

void check_gathers(int r, int n, torch::ScalarType dtype) {
  const std::string type = c10::toString(dtype);
  const auto mine = input_for(r, n, 6, ReduceOp::Sum).reshape({2, 3}).to(dtype);
  const auto parts = lockstep::all_gather(mine);
  if (static_cast<int>(parts.size()) != n) {
    ++failures;
    std::cerr << "all_gather returned " << parts.size() << " parts\n";
  }
  for (int q = 0; q < n && q < static_cast<int>(parts.size()); ++q) {
    expect_equal(parts[q], input_for(q, n, 6, ReduceOp::Sum).reshape({2, 3}).to(dtype),
                 "all_gather part " + std::to_string(q) + " (" + type + ")");
  }
  const auto async_parts = lockstep::all_gather_async(mine).result();
  expect_equal(async_parts.at(n - 1), input_for(n - 1, n, 6, ReduceOp::Sum).reshape({2, 3}).to(dtype),
               "all_gather_async last part (" + type + ")");

  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product}) {
    const auto input = input_for(r, n, n * 2 * 3, op).reshape({n * 2, 3}).to(dtype);
    const auto want = expected_reduction(n, n * 2 * 3, op, dtype).reshape({n * 2, 3}).chunk(n, 0)[r];
    expect_equal(lockstep::reduce_scatter(input, op), want,
                 "reduce_scatter(" + lockstep::to_string(op) + ", " + type + ")");
    expect_equal(lockstep::reduce_scatter_async(input, op).result().at(0), want,
                 "reduce_scatter_async(" + lockstep::to_string(op) + ", " + type + ")");
  }
}

void check_coalesced(int r, int n) {
  std::vector<torch::Tensor> tensors;
  std::vector<torch::Tensor> wanted;
  int64_t numel = 3;
  for (auto dtype : kDtypes) {
    tensors.push_back(input_for(r, n, numel, ReduceOp::Sum).to(dtype));
    wanted.push_back(expected_reduction(n, numel, ReduceOp::Sum, dtype));
    numel += 2;
  }
  tensors.push_back(input_for(r, n, 4, ReduceOp::Sum).to(torch::kFloat).reshape({2, 2}));
  wanted.push_back(expected_reduction(n, 4, ReduceOp::Sum, torch::kFloat).reshape({2, 2}));
  lockstep::all_reduce(tensors);
  for (size_t k = 0; k < tensors.size(); ++k) {
    expect_equal(tensors[k], wanted[k], "coalesced all_reduce tensor " + std::to_string(k));
  }
  // Broadcast of many tensors of mixed dtypes from the last rank.
  std::vector<torch::Tensor> sent;
  for (auto dtype : kDtypes) sent.push_back(input_for(r, n, 5, ReduceOp::Sum).to(dtype).reshape({5, 1}));
  lockstep::broadcast(sent, n - 1);
  for (size_t k = 0; k < sent.size(); ++k) {
    expect_equal(sent[k], input_for(n - 1, n, 5, ReduceOp::Sum).to(kDtypes[k]).reshape({5, 1}),
                 "coalesced broadcast tensor " + std::to_string(k));
  }
  auto copies = std::vector<torch::Tensor>{input_for(r, n, 9, ReduceOp::Sum).to(torch::kDouble)};
  lockstep::all_reduce_async(copies, ReduceOp::Avg).wait();
  expect_equal(copies[0], expected_reduction(n, 9, ReduceOp::Avg, torch::kDouble), "coalesced async Avg");
}

// Tensors from empty_shared, reduced in place (with no staging copies over shared memory).
void check_shared_tensors(int r, int n) {
  for (auto dtype : kDtypes) {
    for (int64_t numel : {int64_t{7}, int64_t{(1 << 16) + 3}}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product}) {
        torch::Tensor t = lockstep::empty_shared({numel}, dtype);
        t.copy_(input_for(r, n, numel, op).to(dtype));
        lockstep::all_reduce(t, op);
        expect_equal(t, expected_reduction(n, numel, op, dtype),
                     "all_reduce of an empty_shared tensor (" + lockstep::to_string(op) + ", " + c10::toString(dtype) +
                         ", " + std::to_string(numel) + ")");
      }
    }
  }
  // A row of a shared tensor, reduced while the other rows stay as they were.
  torch::Tensor rows = lockstep::empty_shared({3, 40000}, torch::kFloat);
  rows.fill_(r + 1);
  torch::Tensor middle = rows[1];
  lockstep::all_reduce_async(middle).wait();
  expect_equal(rows[1], torch::full({40000}, n * (n + 1) / 2, torch::kFloat), "all_reduce of a shared row");
  expect_equal(rows[0], torch::full({40000}, r + 1, torch::kFloat), "the row before it");
  expect_equal(rows[2], torch::full({40000}, r + 1, torch::kFloat), "the row after it");
}

// Ranges of every kind over `numel` elements: everyone's first, then runs of each rank in
// turn, of varying lengths, with an empty one among them.
std::vector<lockstep::OwnedRange> ranges_over(int64_t numel, int n) {
  std::vector<lockstep::OwnedRange> ranges{{numel / 7, lockstep::kEveryRank}, {numel / 7, 0}};
  for (int64_t end = numel / 7, k = 0; end < numel; ++k) {
    end = std::min(numel, end + 1 + (numel / 5) * (k % 3) + 11 * k);
    ranges.push_back({end, k % 4 == 3 ? lockstep::kEveryRank : static_cast<int>(k % n)});
  }
  return ranges;
}

// What reduce_to_owners gives this rank: each range it needs reduced; the rest as it was
// where the transport sends each sum to its owner alone (shared memory; gloo and MPI
// between two ranks, for Sum).
void check_reduce_to_owners(int r, int n) {
  const std::string transport = lockstep::ProcessGroup().transport();
  const bool pair = n == 2 && (transport == "gloo" || transport == "mpi");
  auto owners_alone = [&](ReduceOp op) {
    return (transport == "shm" && op != ReduceOp::Avg) || (pair && op == ReduceOp::Sum);
  };
  for (auto dtype : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kInt}) {
    for (int64_t numel : {int64_t{15}, int64_t{(1 << 17) + 5}}) {
      for (bool shared : {false, true}) {
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
          const auto ranges = ranges_over(numel, n);
          const auto input = input_for(r, n, numel, op).to(dtype);
          torch::Tensor t = shared ? lockstep::empty_shared({numel}, dtype) : torch::empty({numel}, dtype);
          t.copy_(input);
          if (numel > 1000) {
            lockstep::reduce_to_owners_async(t, ranges, op).wait();
          } else {
            lockstep::reduce_to_owners(t, ranges, op);
          }
          const auto want = expected_reduction(n, numel, op, dtype);
          int64_t begin = 0;
          for (const auto& range : ranges) {
            const std::string what = "reduce_to_owners(" + lockstep::to_string(op) + ", " + c10::toString(dtype) +
                                     ", " + std::to_string(numel) + (shared ? ", shared" : "") + ") range " +
                                     std::to_string(begin) + ".." + std::to_string(range.end) + " of rank " +
                                     std::to_string(range.owner);
            const auto got = t.slice(0, begin, range.end);
            if (range.owner == lockstep::kEveryRank || range.owner == r) {
              expect_equal(got, want.slice(0, begin, range.end), what);
            } else if (owners_alone(op)) {
              expect_equal(got, input.slice(0, begin, range.end), what + ", another's");
            }
            begin = range.end;
          }
        }
      }
    }
  }
}

void check_everything() {
  const int r = lockstep::rank();
  const int n = lockstep::world_size();
  for (auto dtype : kDtypes) {
    check_all_reduce(r, n, dtype, 15);
    check_rooted(r, n, dtype);
    check_gathers(r, n, dtype);
  }
  // Large enough to be split into many segments by the backends.
  check_all_reduce(r, n, torch::kFloat, (1 << 19) + 3);
  check_all_reduce(r, n, torch::kHalf, (1 << 18) + 1);
  check_coalesced(r, n);
  check_shared_tensors(r, n);
  check_reduce_to_owners(r, n);

  // Many async calls in flight at once complete in order with the right values.
  std::vector<torch::Tensor> pending;
  std::vector<lockstep::Work> works;
  for (int k = 0; k < 20; ++k) {
    pending.push_back(torch::full({100}, r + k, torch::kLong));
    works.push_back(lockstep::all_reduce_async(pending.back()));
  }
  lockstep::barrier();
  lockstep::barrier_async().wait();
  for (int k = 0; k < 20; ++k) {
    works[k].wait();
    expect_equal(pending[k], torch::full({100}, n * (n - 1) / 2 + n * k, torch::kLong),
                 "async all_reduce #" + std::to_string(k));
  }
}

// Rank 1 passes a different shape or dtype; every rank must get an error, not hang.
int mismatch(const std::string& kind) {
  const int r = lockstep::rank();
  torch::Tensor t = torch::ones({4}, torch::kFloat);
  if (r == 1 && kind == "shape") t = torch::ones({5}, torch::kFloat);
  if (r == 1 && kind == "dtype") t = torch::ones({4}, torch::kInt);
  try {
    lockstep::all_reduce(t);
  } catch (const lockstep::MismatchError& e) {
    std::cout << "rank " << r << " MismatchError: " << e.what() << std::endl;
    try {
      torch::Tensor again = torch::ones({4});
      lockstep::all_reduce(again);
      std::cout << "rank " << r << " group still usable" << std::endl;
    } catch (const lockstep::Error&) {
      std::cout << "rank " << r << " group unusable" << std::endl;
    }
    return 0;
  } catch (const lockstep::Error& e) {
    std::cout << "rank " << r << " Error: " << e.what() << std::endl;
    return 3;
  }
  std::cout << "rank " << r << " no error" << std::endl;
  return 4;
}

// The last rank leaves; the others must fail within the timeout and say which call stalled.
int dead_rank(const std::string& how) {
  const int r = lockstep::rank();
  const int n = lockstep::world_size();
  torch::Tensor t = torch::ones({4});
  lockstep::all_reduce(t);  // everyone is connected
  if (r == n - 1) {
    if (how == "exit") std::_Exit(0);
    // Hangs without a collective; one live recovery aborts is left once the others are done.
    std::this_thread::sleep_for(std::chrono::seconds(how == "abort" ? 8 : 60));
    std::_Exit(0);
  }
  std::thread aborting;
  if (how == "abort") {  // as live recovery does once the hung rank's launcher marks it ended
    aborting = std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      lockstep::detail::abort_default_group(lockstep::detail::generation(), "worker 2 ended");
    });
  }
  struct Joined {
    std::thread& thread;
    ~Joined() {
      if (thread.joinable()) thread.join();
    }
  } joined{aborting};
  const auto start = std::chrono::steady_clock::now();
  try {
    lockstep::all_reduce(t);
  } catch (const lockstep::Error& e) {
    std::cout << "rank " << r << " error: " << e.what() << std::endl;
    const auto waited = std::chrono::steady_clock::now() - start;
    std::cout << "rank " << r << " waited " << std::chrono::duration_cast<std::chrono::seconds>(waited).count() << " s"
              << std::endl;
    return 0;
  }
  std::cout << "rank " << r << " no error" << std::endl;
  return 4;
}

// The even and the odd ranks form groups that reduce while the default group reduces too,
// with async calls of all three in flight at once.
void check_sub_groups() {
  const int r = lockstep::rank();
  const int n = lockstep::world_size();
  std::vector<int> evens, odds;
  for (int q = 0; q < n; ++q) (q % 2 == 0 ? evens : odds).push_back(q);
  const lockstep::ProcessGroup even = lockstep::new_group(evens);
  const lockstep::ProcessGroup odd = lockstep::new_group(odds);
  const lockstep::ProcessGroup& mine = r % 2 == 0 ? even : odd;
  const std::vector<int>& members = r % 2 == 0 ? evens : odds;
  if (mine.rank() != r / 2 || mine.size() != static_cast<int>(members.size()) ||
      (r % 2 == 0 ? odd : even).rank() != -1) {
    ++failures;
    std::cerr << "rank " << r << ": sub-group rank " << mine.rank() << " of " << mine.size() << "\n";
  }
  int64_t member_sum = 0;
  for (int q : members) member_sum += q + 1;
  for (int k = 0; k < 3; ++k) {
    torch::Tensor in_group = torch::full({1000 * (k + 1)}, r + 1, torch::kLong);
    torch::Tensor in_world = torch::full({7}, r + 1, torch::kLong);
    lockstep::Work group_work = lockstep::all_reduce_async(in_group, ReduceOp::Sum, mine);
    lockstep::Work world_work = lockstep::all_reduce_async(in_world);
    group_work.wait();
    world_work.wait();
    expect_equal(in_group, torch::full({1000 * (k + 1)}, member_sum, torch::kLong), "sub-group all_reduce");
    expect_equal(in_world, torch::full({7}, n * (n + 1) / 2, torch::kLong), "all_reduce beside a sub-group");
  }
  torch::Tensor from_last = torch::full({5}, r, torch::kFloat);
  lockstep::broadcast(from_last, mine.size() - 1, mine);
  expect_equal(from_last, torch::full({5}, members.back(), torch::kFloat), "sub-group broadcast");
  const auto parts = lockstep::all_gather(torch::full({2}, r, torch::kInt), mine);
  for (size_t g = 0; g < parts.size(); ++g) {
    expect_equal(parts[g], torch::full({2}, members[g], torch::kInt), "sub-group all_gather");
  }
  // A group of one, and a sub-group of a sub-group.
  const lockstep::ProcessGroup alone = lockstep::new_group({mine.rank()}, mine);
  torch::Tensor single = torch::full({3}, 2.5);
  lockstep::all_reduce(single, ReduceOp::Sum, alone);
  expect_equal(single, torch::full({3}, 2.5), "all_reduce on a group of one");
  lockstep::barrier(mine);
  try {
    torch::Tensor t = torch::ones({1});
    lockstep::all_reduce(t, ReduceOp::Sum, r % 2 == 0 ? odd : even);
    ++failures;
    std::cerr << "rank " << r << ": a collective on a group it is not in did not throw\n";
  } catch (const lockstep::Error& e) {
    std::cout << "rank " << r << " outside: " << e.what() << std::endl;
  }
  std::cout << "rank " << r << " sub-group transport " << mine.transport() << std::endl;
}

// Every rank reduces a large tensor over and over; the test SIGKILLs one of them meanwhile.
int loop_until_failure() {
  const int r = lockstep::rank();
  torch::Tensor t = torch::ones({1 << 20});
  lockstep::all_reduce(t);
  std::cout << "rank " << r << " looping" << std::endl;
  try {
    for (;;) lockstep::all_reduce(t);
  } catch (const lockstep::Error& e) {
    std::cout << "rank " << r << " error: " << e.what() << std::endl;
  }
  return 0;
}

// "rank R of N (local L of M, BACKEND, TRANSPORT)", how every success line begins.
std::string who() {
  return "rank " + std::to_string(lockstep::rank()) + " of " + std::to_string(lockstep::world_size()) + " (local " +
         std::to_string(lockstep::local_rank()) + " of " + std::to_string(lockstep::local_world_size()) + ", " +
         lockstep::to_string(lockstep::backend()) + ", " + lockstep::ProcessGroup().transport() + ")";
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "all";
  // A restarted job's workers check every collective; the first attempt's loop until a peer
  // is lost, and fail then.
  const char* attempt = std::getenv("LOCKSTEP_RESTART_COUNT");
  const bool restarted = attempt != nullptr && std::atoi(attempt) > 0;
  if (scenario == "loop-then-all") scenario = restarted ? "all" : "loop-and-fail";
  try {
    lockstep::init();
    if (scenario == "all") {
      check_everything();
      if (failures > 0) return 1;
      std::cout << who() << ": all collectives correct" << std::endl;
    } else if (scenario == "16-bit-means") {
      for (const auto& failure : lockstep::testing::check_16_bit_means(lockstep::ProcessGroup())) {
        ++failures;
        std::cerr << "rank " << lockstep::rank() << ": " << failure << "\n";
      }
      if (failures > 0) return 1;
      std::cout << who() << ": 16-bit means correct" << std::endl;
    } else if (scenario == "mismatch-shape" || scenario == "mismatch-dtype") {
      const int code = mismatch(scenario.substr(9));
      if (code != 0) return code;
    } else if (scenario == "dead-exit" || scenario == "dead-hang" || scenario == "dead-abort") {
      const int code = dead_rank(scenario.substr(5));
      if (code != 0) return code;
      return 0;  // no shutdown: its barrier would wait for the dead rank
    } else if (scenario == "sub-groups") {
      check_sub_groups();
      if (failures > 0) return 1;
      std::cout << "rank " << lockstep::rank() << ": sub-groups correct" << std::endl;
    } else if (scenario == "large-shared") {
      const int r = lockstep::rank(), n = lockstep::world_size();
      torch::Tensor t = lockstep::empty_shared({4 << 20}, torch::kFloat);  // 16 MB
      t.fill_(r + 1);
      lockstep::all_reduce(t);
      expect_equal(t, torch::full({4 << 20}, n * (n + 1) / 2, torch::kFloat), "a large shared tensor");
      if (failures > 0) return 1;
      std::cout << "rank " << r << ": large shared tensor reduced" << std::endl;
    } else if (scenario == "loop") {
      return loop_until_failure();  // no shutdown: its barrier would wait for the killed rank
    } else if (scenario == "loop-and-fail") {
      loop_until_failure();
      return 1;
    } else if (scenario == "sigpipe") {
      std::raise(SIGPIPE);  // what a write to a socket whose peer died raises
      std::cout << "rank " << lockstep::rank() << " survived SIGPIPE" << std::endl;
    } else if (scenario == "init-only") {
      std::cout << "rank " << lockstep::rank() << " joined" << std::endl;
    } else {
      std::cerr << "unknown scenario " << scenario << "\n";
      return 2;
    }
    lockstep::shutdown();
  } catch (const std::exception& e) {
    std::cerr << e.what() << std::endl;
    return 1;
  }
  return 0;
}
