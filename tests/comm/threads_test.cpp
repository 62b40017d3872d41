// Ranks as threads over gloo and an in-memory store: cheap checks of ordering, async work,
// mismatches and failures, with the same communicator code the processes use.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#include <torch/torch.h>

#include "comm/groups/communicator.h"
#include "comm/transports/gloo_compat.h"
#include "comm/transports/gloo_transport.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

using std::chrono::milliseconds;

// Gloo, except that its first all_reduce is refused in the call's turn, before any data
// moves: what a staged CUDA call on a capturing stream does (device_call_cuda.cpp), here on
// the CPU.
class RefusesFirstAllReduce : public HostTransport {
 public:
  explicit RefusesFirstAllReduce(std::unique_ptr<HostTransport> gloo) : gloo_(std::move(gloo)) {}
  int rank() const override { return gloo_->rank(); }
  int size() const override { return gloo_->size(); }
  std::string name() const override { return gloo_->name(); }
  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override {
    if (!refused_) {
      refused_ = true;
      throw CallRefused("lockstep::all_reduce: refused as made");
    }
    gloo_->all_reduce(tensor, op, tag);
  }
  void broadcast(at::Tensor& tensor, int root, uint32_t tag) override { gloo_->broadcast(tensor, root, tag); }
  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override {
    gloo_->reduce(tensor, root, op, tag);
  }
  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override {
    gloo_->all_gather(input, output, tag);
  }
  void barrier(uint32_t tag) override { gloo_->barrier(tag); }
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override {
    gloo_->all_gather_bytes(input, output, bytes, tag);
  }

 private:
  std::unique_ptr<HostTransport> gloo_;
  bool refused_ = false;
};

// Runs body(communicator) on `n` threads, each its own rank, and returns what each returned.
template <typename Body>
auto on_threads(int n, Body body, milliseconds timeout = milliseconds(5000), bool debug = false,
                bool refuse_first_all_reduce = false) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  using Result = decltype(body(std::declval<Communicator&>()));
  std::vector<std::future<Result>> futures;
  for (int r = 0; r < n; ++r) {
    futures.push_back(std::async(std::launch::async, [=] {
      auto context = std::make_shared<gloo::rendezvous::Context>(r, n);
      context->setTimeout(timeout);
      auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
      gloo_compat::connect_full_mesh(*context, store, device);
      std::unique_ptr<HostTransport> host = std::make_unique<GlooTransport>(context, store, timeout);
      if (refuse_first_all_reduce) host = std::make_unique<RefusesFirstAllReduce>(std::move(host));
      Communicator comm(GroupTransports{std::move(host), {}}, timeout, debug);
      return body(comm);
    }));
  }
  std::vector<Result> results;
  for (auto& f : futures) results.push_back(f.get());
  return results;
}

TEST(Threads, AsyncWorkCompletesInCallOrder) {
  const auto results = on_threads(3, [](Communicator& comm) {
    std::vector<torch::Tensor> tensors;
    std::vector<Work> works;
    for (int k = 0; k < 50; ++k) {
      tensors.push_back(torch::full({1000}, comm.rank() * 100 + k, torch::kDouble));
      works.push_back(comm.all_reduce({tensors.back()}, ReduceOp::Sum, /*blocking=*/false));
    }
    torch::Tensor last = torch::full({3}, comm.rank() + 1.0);
    comm.all_reduce({last}, ReduceOp::Max, /*blocking=*/true);  // queued behind the async ones
    bool ok = last.equal(torch::full({3}, 3.0));
    for (int k = 0; k < 50; ++k) {
      works[k].wait();
      ok = ok && works[k].is_completed() && tensors[k].equal(torch::full({1000}, 300.0 + 3 * k, torch::kDouble));
    }
    return ok;
  });
  for (bool ok : results) EXPECT_TRUE(ok);
}

TEST(Threads, DebugModeMismatchLeavesTheGroupUsable) {
  const auto results = on_threads(
      2,
      [](Communicator& comm) {
        std::string message;
        try {
          comm.all_reduce({torch::ones({comm.rank() + 2})}, ReduceOp::Sum, true);
        } catch (const MismatchError& e) {
          message = e.what();
        }
        torch::Tensor t = torch::ones({2});
        comm.all_reduce({t}, ReduceOp::Sum, true);
        return message + (t.equal(torch::full({2}, 2.0)) ? "|usable" : "|broken");
      },
      milliseconds(5000), /*debug=*/true);
  for (const auto& m : results) {
    EXPECT_NE(m.find("rank 0: all_reduce #0 (float32[2], Sum)"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1: all_reduce #0 (float32[3], Sum)"), std::string::npos) << m;
    EXPECT_NE(m.find("|usable"), std::string::npos) << m;
  }
}

TEST(Threads, AfterATimeoutTheGroupSaysItIsUnusable) {
  const auto results = on_threads(
      2,
      [](Communicator& comm) {
        std::string first, second;
        try {
          if (comm.rank() == 0)
            comm.all_reduce({torch::ones({2})}, ReduceOp::Sum, true);
          else
            comm.broadcast({torch::ones({2})}, 0, true);
        } catch (const Error& e) {
          first = e.what();
        }
        try {
          comm.barrier(true);
        } catch (const Error& e) {
          second = e.what();
        }
        return first + "\n" + second;
      },
      milliseconds(1000));
  EXPECT_NE(results[0].find("rank 1: failed in broadcast #0 (float32[2], root 0)"), std::string::npos) << results[0];
  EXPECT_NE(results[1].find("rank 0: failed in all_reduce #0 (float32[2], Sum)"), std::string::npos) << results[1];
  for (const auto& m : results) {
    EXPECT_NE(m.find("cannot run barrier: the process group failed earlier"), std::string::npos) << m;
  }
}

TEST(Threads, ParametersThatRequireGradCanBeWrittenInPlace) {
  const auto results = on_threads(2, [](Communicator& comm) {
    torch::nn::Linear layer(3, 2);
    torch::nn::init::constant_(layer->weight, comm.rank() + 1.0);
    comm.broadcast({layer->weight}, /*root=*/1, true);
    comm.all_reduce({layer->weight}, ReduceOp::Avg, true);
    return layer->weight.requires_grad() && layer->weight.equal(torch::full({2, 3}, 2.0));
  });
  for (bool ok : results) EXPECT_TRUE(ok);
}

TEST(Threads, OwnedRangesThatDoNotFitTheTensorOrDifferAcrossRanksAreRefused) {
  const auto results = on_threads(
      2,
      [](Communicator& comm) {
        std::vector<std::string> messages;
        const std::vector<std::vector<OwnedRange>> bad{{{2, 0}}, {{2, 1}, {1, 0}, {4, 0}}, {{4, 2}}};
        for (const auto& ranges : bad) {
          try {
            comm.reduce_to_owners(torch::ones({4}), ranges, ReduceOp::Sum, true);
            messages.push_back("no error");
          } catch (const Error& e) {
            messages.push_back(e.what());
          }
        }
        // Ranges that are fine on each rank, but not the same.
        const std::vector<OwnedRange> mine{{2, comm.rank()}, {4, kEveryRank}};
        try {
          comm.reduce_to_owners(torch::ones({4}), mine, ReduceOp::Sum, true);
          messages.push_back("no error");
        } catch (const Error& e) {
          messages.push_back(e.what());
        }
        torch::Tensor t = torch::full({4}, comm.rank() + 1.0);
        comm.reduce_to_owners(t, {{2, 1}, {4, kEveryRank}}, ReduceOp::Sum, true);  // the group still works
        messages.push_back(t.slice(0, 2).equal(torch::full({2}, 3.0)) ? "usable" : "wrong sums");
        return messages;
      },
      milliseconds(5000), /*debug=*/true);
  const auto& m = results[0];
  EXPECT_EQ(m[0],
            "lockstep::reduce_to_owners: the ranges cover 2 of the tensor's 4 elements; the last one must end at 4");
  EXPECT_EQ(m[1],
            "lockstep::reduce_to_owners: range 1 (end 1, owner 0) does not end between its start 2 and the "
            "tensor's 4 elements");
  EXPECT_EQ(m[2],
            "lockstep::reduce_to_owners: range 0 (end 4, owner 2) is owned by no rank: owners are 0..1 or "
            "kEveryRank");
  EXPECT_NE(m[3].find("ranks called different collectives"), std::string::npos) << m[3];
  EXPECT_NE(m[3].find("rank 1: reduce_to_owners #0 (float32[4], Sum, ranges "), std::string::npos) << m[3];
  EXPECT_EQ(m[4], "usable");
}

TEST(Threads, BadTensorsAreRejectedBeforeAnythingIsSent) {
  const auto results = on_threads(1, [](Communicator& comm) {
    std::vector<std::string> messages;
    for (auto t : {torch::ones({3, 4}).t(), torch::ones({2}, torch::kComplexFloat), torch::Tensor()}) {
      try {
        comm.all_reduce({t}, ReduceOp::Sum, true);
        messages.push_back("no error");
      } catch (const Error& e) {
        messages.push_back(e.what());
      }
    }
    try {
      comm.broadcast({torch::ones({1})}, 5, true);
    } catch (const Error& e) {
      messages.push_back(e.what());
    }
    try {
      comm.reduce_scatter(torch::ones({3}), ReduceOp::Sum, true);
      messages.push_back("no error");
    } catch (const Error& e) {
      messages.push_back(e.what());
    }
    return messages;
  });
  const auto& m = results[0];
  EXPECT_EQ(m[0],
            "lockstep::all_reduce: the tensor of shape [4, 3] with strides [1, 4] is not "
            "contiguous; pass tensor.contiguous()");
  EXPECT_NE(m[1].find("dtype ComplexFloat is not supported"), std::string::npos) << m[1];
  EXPECT_EQ(m[2], "lockstep::all_reduce: the tensor is undefined");
  EXPECT_EQ(m[3], "lockstep::broadcast: root 5 is not a rank; ranks are 0..0");
  EXPECT_EQ(m[4], "no error");  // world size 1 divides anything
}

TEST(Threads, ACallRefusedInItsTurnLeavesTheGroupUsable) {
  const auto results = on_threads(
      2,
      [](Communicator& comm) {
        std::string refusal = "no error";
        try {
          comm.all_reduce({torch::ones({2})}, ReduceOp::Sum, true);
        } catch (const Error& e) {
          refusal = e.what();
        }
        torch::Tensor t = torch::full({2}, comm.rank() + 1.0);
        comm.all_reduce({t}, ReduceOp::Sum, true);
        comm.barrier(true);
        return refusal + "; then " + std::to_string(t[0].item<double>());
      },
      milliseconds(5000), /*debug=*/false, /*refuse_first_all_reduce=*/true);
  for (const auto& r : results) EXPECT_EQ(r, "lockstep::all_reduce: refused as made; then 3.000000");
}

// What every transport that has a store (gloo's own, or the world's for shared memory)
// tells after a failure: here two ranks stuck in different collectives, as a watchdog finds
// NCCL work that never ends, name both calls and say that they differ.
TEST(Threads, FailureReportsNameEachRanksCallAndSayTheyDiffer) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<std::string> messages(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      const FailureReports reports(store, r, 2, {4, 7});
      Call call(r == 0 ? Collective::AllReduce : Collective::Broadcast, {torch::ones({2})});
      call.seq = 3;
      try {
        std::rethrow_exception(reports.explain(call, TimeoutError("did not finish on the device within 1 s"),
                                               std::chrono::seconds(2), milliseconds(1000)));
      } catch (const MismatchError& e) {
        messages[r] = e.what();
      } catch (const std::exception& e) {
        messages[r] = std::string("not a mismatch: ") + e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(messages[0],
            "lockstep: rank 4: all_reduce #3 (float32[2], Sum) failed after 2.0 s: did not finish on the "
            "device within 1 s\n  rank 7: failed in broadcast #3 (float32[2], root 0)\nranks called "
            "different collectives; every rank must pass the same shapes, dtypes, ops and roots, in the "
            "same order");
  EXPECT_NE(messages[1].find("lockstep: rank 7: broadcast #3 (float32[2], root 0) failed after 2.0 s"),
            std::string::npos)
      << messages[1];
  EXPECT_NE(messages[1].find("rank 4: failed in all_reduce #3 (float32[2], Sum)"), std::string::npos) << messages[1];
}

// A CPU machine has no CUDA tensors to pass, but libtorch's meta device stands in for any
// device the build does not move.
TEST(Threads, TensorsOnAnotherDeviceOrOnTwoDevicesAreRefusedWithTheReason) {
  const auto results = on_threads(1, [](Communicator& comm) {
    std::vector<std::string> messages;
    const auto on_meta = torch::ones({2}, torch::TensorOptions().device(torch::kMeta));
    for (const auto& tensors : {std::vector<torch::Tensor>{on_meta}, {torch::ones({2}), on_meta}}) {
      try {
        comm.all_reduce(tensors, ReduceOp::Sum, true);
        messages.push_back("no error");
      } catch (const Error& e) {
        messages.push_back(e.what());
      }
    }
    return messages;
  });
  const auto& m = results[0];
  EXPECT_EQ(m[0].rfind("lockstep::all_reduce: the tensor is on meta", 0), 0u) << m[0];
  EXPECT_EQ(m[1], "lockstep::all_reduce: one call has tensors on cpu and on meta; pass tensors of one device");
}

}  // namespace
}  // namespace lockstep
