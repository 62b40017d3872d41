// Shards over HTTP(S) from a real nginx that the tests start on loopback, with a proxy of
// the tests' own in front of it for the faults of real networks: the same samples as from
// disk, retries that end with the same result, and one line naming the URL when they run out.
#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/registry.h"
#include "lockstep/data/shards.h"
#include "support/fault_proxy.h"
#include "support/nginx_server.h"
#include "support/expected_errors.h"
#include "support/tool_process.h"

namespace lockstep::testing {
namespace {

using Clock = std::chrono::steady_clock;

// 600 test examples of Fashion-MNIST in 4 shards, under `folder`/shards.
struct PackedSplit {
  PackedSplit() {
    original = data::first_examples(data::read_fashion_mnist(FASHION_MNIST_DIR, "t10k"), 600);
    data::pack_shards(*original, "test", folder.path() + "/shards",
                      data::PackOptions().shard_bytes(400 * 1024).class_names(data::fashion_mnist_classes()));
  }
  TemporaryDirectory folder;
  std::shared_ptr<data::Dataset> original;
};

void expect_same_examples(const data::Dataset& read, const data::Dataset& original) {
  ASSERT_EQ(read.size(), original.size());
  ASSERT_EQ(read.shard_sizes().size(), 4u);
  for (size_t i = 0; i < read.size(); ++i) {
    const auto back = read.get(i);
    const auto sample = original.get(i);
    ASSERT_EQ(back.label, sample.label) << "#" << i;
    ASSERT_TRUE(torch::equal(back.image, sample.image)) << "#" << i;
  }
}

TEST(RemoteShards, FromNginxOverHttpAndHttpsTheSamplesAreThoseOnDisk) {
  PackedSplit split;
  NginxServer http(split.folder.path(), false), https(split.folder.path(), true);
  ASSERT_TRUE(http.available()) << http.why_not();
  ASSERT_TRUE(https.available()) << https.why_not();
  expect_same_examples(data::ShardDataset(http.url() + "/shards/", "test"), *split.original);
  expect_same_examples(
      data::ShardDataset(https.url() + "/shards", "test", data::ShardOptions().ca_file(https.certificate())),
      *split.original);
  // Shards named by a brace pattern, without the index.
  expect_same_examples(
      data::ShardDataset(http.url() + "/shards", "test-{000000..000003}.tar", data::ShardOptions().classes(10)),
      *split.original);
  // Through a registry entry, as `lockstep train` opens it.
  const auto registry =
      data::Registry::parse("[remote]\ntype = \"shards\"\npath = \"" + https.url() + "/shards\"\nca_file = \"" +
                                https.certificate() + "\"\nsplits = { test = \"test\" }\n",
                            "t.toml", "");
  EXPECT_EQ(data::check_readable(registry.at("remote")), "");
  EXPECT_EQ(data::class_names(registry.at("remote")), data::fashion_mnist_classes());
}

TEST(RemoteShards, AnUntrustedCertificateIsRefusedInOneLine) {
  PackedSplit split;
  NginxServer https(split.folder.path(), true);
  ASSERT_TRUE(https.available()) << https.why_not();
  const auto started = Clock::now();
  const std::string message = data_error([&] { data::ShardDataset(https.url() + "/shards", "test"); });
  EXPECT_TRUE(contains(message, "cannot read " + https.url() + "/shards/test.index.json: ")) << message;
  EXPECT_TRUE(contains(message, "certificate")) << message;
  EXPECT_TRUE(contains(message, "trust the server's certificate authority with ca_file in the registry entry"))
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5)) << "not retried";
}

TEST(RemoteShards, NotFoundAndForbiddenAreNamedAndNotRetried) {
  PackedSplit split;
  NginxServer http(split.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  FaultProxy counting(http.port(), Fault::kAnswer503, 0);
  EXPECT_EQ(data_error([&] { data::ShardDataset(counting.url() + "/nowhere/", "train"); }),
            "cannot read " + counting.url() + "/nowhere/train.index.json: HTTP 404");
  EXPECT_EQ(counting.requests(), 1);
  EXPECT_EQ(data_error([&] { data::ShardDataset(counting.url() + "/forbidden", "test"); }),
            "cannot read " + counting.url() + "/forbidden/test.index.json: HTTP 403");
  EXPECT_EQ(counting.requests(), 2);
}

// Each fault spoils the first requests; the reads retry and end with the samples on disk,
// also where a cut body is continued by a server that ignores Range (and sends it all again).
TEST(RemoteShards, ResetsMidBodyAnd503sAndStallsAreRetriedToTheSameSamples) {
  PackedSplit split;
  NginxServer http(split.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  for (const Fault fault :
       {Fault::kCloseMidBody, Fault::kCloseMidBodyIgnoringRange, Fault::kAnswer503, Fault::kStall}) {
    SCOPED_TRACE(fault == Fault::kCloseMidBody                ? "closed mid-body"
                 : fault == Fault::kCloseMidBodyIgnoringRange ? "closed mid-body, then Range ignored"
                 : fault == Fault::kAnswer503                 ? "503"
                                                              : "stalled");
    // A stall costs a whole timeout before it is retried, and the retries of one read get
    // 4 x timeout in all: one stall, against three of the quick faults.
    const int spoiled = fault == Fault::kStall ? 1 : 3;
    FaultProxy proxy(http.port(), fault, spoiled);
    const auto started = Clock::now();
    expect_same_examples(data::ShardDataset(proxy.url() + "/shards", "test", data::ShardOptions().timeout(2)),
                         *split.original);
    EXPECT_GT(proxy.requests(), spoiled + 4);  // the spoiled ones, the index and every shard
    EXPECT_LT(Clock::now() - started, std::chrono::seconds(20));
  }
}

// Memory for one shard, so that every pass reads each shard again: from the cache, not
// the network, once it holds them; a copy that fails its checks is read again from nginx.
TEST(RemoteShards, ACachedSecondPassReadsNothingFromTheNetwork) {
  PackedSplit split;
  NginxServer http(split.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  FaultProxy counting(http.port(), Fault::kAnswer503, 0);
  TemporaryDirectory cache;
  const auto options = data::ShardOptions().memory_bytes(1).cache(cache.path());
  const auto read_all = [&] {
    const data::ShardDataset remote(counting.url() + "/shards", "test", options);
    for (size_t i = 0; i < remote.size(); ++i) remote.get(i);
    return remote.shard_reads();
  };
  EXPECT_EQ(read_all(), 4);
  EXPECT_EQ(counting.requests(), 1 + 4);  // the index and each shard
  EXPECT_EQ(read_all(), 4);
  EXPECT_EQ(counting.requests(), 1 + 4 + 1) << "only the index, which is always read afresh";

  // A copy gone bad in the cache.
  std::string copy;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cache.path())) {
    if (entry.path().filename() == "test-000002.tar") copy = entry.path().string();
  }
  ASSERT_FALSE(copy.empty());
  std::filesystem::resize_file(copy, 1000);
  read_all();
  EXPECT_EQ(counting.requests(), 1 + 4 + 1 + 1 + 1) << "the index and the bad copy's shard";

  // A limit of one shard's bytes keeps only the most recent copy.
  TemporaryDirectory small;
  const data::ShardDataset limited(counting.url() + "/shards", "test",
                                   data::ShardOptions(options).cache(small.path()).cache_bytes(500 * 1024));
  for (size_t i = 0; i < limited.size(); ++i) limited.get(i);
  size_t kept = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(small.path())) {
    if (entry.is_regular_file()) kept += entry.file_size();
  }
  EXPECT_GT(kept, 0u);
  EXPECT_LE(kept, 500u * 1024);
}

TEST(RemoteShards, WhenRetriesRunOutTheUrlAndStatusAreNamedWithinTheBudget) {
  PackedSplit split;
  NginxServer http(split.folder.path(), false);
  ASSERT_TRUE(http.available()) << http.why_not();
  FaultProxy failing(http.port(), Fault::kAnswer503, 1000000);
  const auto started = Clock::now();
  const std::string message =
      data_error([&] { data::ShardDataset(failing.url() + "/shards", "test", data::ShardOptions().timeout(0.5)); });
  EXPECT_TRUE(contains(message, "cannot read " + failing.url() + "/shards/test.index.json: HTTP 503 (gave up after "))
      << message;
  EXPECT_GT(failing.requests(), 2);
  // 4 x timeout: 2 s of retries, and no more.
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));

  FaultProxy stalled(http.port(), Fault::kStall, 1000000);
  const std::string stall =
      data_error([&] { data::ShardDataset(stalled.url() + "/shards", "test", data::ShardOptions().timeout(0.5)); });
  EXPECT_TRUE(contains(stall, "cannot read " + stalled.url() + "/shards/test.index.json: Timeout was reached"))
      << stall;
}

}  // namespace
}  // namespace lockstep::testing
