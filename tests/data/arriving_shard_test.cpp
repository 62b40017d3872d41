// A shard used while it downloads: samples whose blocks have arrived and passed their
// checksums are given out, those after wait, and a corrupt block fails only what it holds
// and what follows.
#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/formats/shard_index.h"
#include "data/pipeline/arriving_shard.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/shards.h"
#include "lockstep/error.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

using Bytes = std::vector<uint8_t>;

// A split of one shard of 3000 Fashion-MNIST examples (several check blocks), its bytes and
// what its index says of it.
struct PackedShard {
  TemporaryDirectory folder;
  Bytes bytes;
  data::ShardIndex index;
  std::string path;

  PackedShard() {
    const auto images = data::first_examples(data::read_fashion_mnist(FASHION_MNIST_DIR, "t10k"), 3000);
    data::pack_shards(*images, "test", folder.path(), data::PackOptions().shard_bytes(64 << 20));
    path = folder.path() + "/test-000000.tar";
    std::ifstream shard(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(shard), {});
    std::ifstream text(folder.path() + "/test.index.json");
    index = data::index_from_json(std::string(std::istreambuf_iterator<char>(text), {}), "test.index.json");
  }

  data::ArrivingShard arriving() const {
    return data::ArrivingShard(index.shards.at(0), index.block_bytes, path, "test.index.json");
  }
};

TEST(ArrivingShard, SamplesInTheCheckedBlocksAreGivenBeforeTheRestArrives) {
  const PackedShard packed;
  ASSERT_EQ(packed.index.shards.size(), 1u);
  ASSERT_GE(packed.index.shards[0].block_crc32.size(), 3u) << "the shard spans several check blocks";
  data::ArrivingShard shard = packed.arriving();
  shard.start_over();
  const size_t first_part = data::kCheckBlockBytes + data::kCheckBlockBytes / 2;
  ASSERT_TRUE(shard.arrive(packed.bytes.data(), first_part));

  const data::SampleMembers first = shard.sample(0);
  EXPECT_EQ(first.key, "00000000");
  EXPECT_LE(first.label.offset + first.label.size, data::kCheckBlockBytes);

  auto last = std::async(std::launch::async, [&] { return shard.sample(2999).key; });
  EXPECT_EQ(last.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "the last sample's bytes have not arrived";
  ASSERT_TRUE(shard.arrive(packed.bytes.data() + first_part, packed.bytes.size() - first_part));
  ASSERT_TRUE(shard.finish());
  EXPECT_EQ(last.get(), "00002999");
}

TEST(ArrivingShard, ACorruptBlockFailsOnlyTheSamplesFromItOn) {
  const PackedShard packed;
  Bytes corrupt = packed.bytes;
  const size_t bad_block = 2, start = bad_block * data::kCheckBlockBytes;
  corrupt[start + 100] ^= 0x40;
  data::ArrivingShard shard = packed.arriving();
  shard.start_over();
  EXPECT_FALSE(shard.arrive(corrupt.data(), corrupt.size()));
  const std::string expected = packed.path +
                               " does not match its checksum in test.index.json: the shard is corrupt or changed "
                               "since it was packed (bytes " +
                               std::to_string(start) + " to " + std::to_string(start + data::kCheckBlockBytes) + ")";
  try {
    std::rethrow_exception(shard.problem());
  } catch (const DataError& error) {
    EXPECT_EQ(std::string(error.what()), expected);
  }
  EXPECT_EQ(shard.sample(0).key, "00000000") << "its blocks were checked before the bad one";

  // Read again whole, as from the origin after a bad cached copy: the same shard completes.
  shard.start_over();
  ASSERT_TRUE(shard.arrive(packed.bytes.data(), packed.bytes.size()));
  ASSERT_TRUE(shard.finish());
  EXPECT_EQ(shard.sample(2999).key, "00002999");

  // Given up on: waiting for a sample after the bad block throws why.
  data::ArrivingShard given_up = packed.arriving();
  given_up.start_over();
  EXPECT_FALSE(given_up.arrive(corrupt.data(), corrupt.size()));
  given_up.fail(given_up.problem());
  EXPECT_EQ(given_up.sample(1).key, "00000001");
  try {
    given_up.sample(2999);
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& error) {
    EXPECT_EQ(std::string(error.what()), expected);
  }
}

// A shard that grew is named by its size, not by its last block's checksum.
TEST(ArrivingShard, MoreBytesThanTheIndexSaysAreNamedWithBothCounts) {
  const PackedShard packed;
  Bytes longer = packed.bytes;
  longer.resize(longer.size() + 512, 0);
  data::ArrivingShard shard = packed.arriving();
  shard.start_over();
  ASSERT_TRUE(shard.arrive(longer.data(), longer.size()));
  EXPECT_FALSE(shard.finish());
  try {
    std::rethrow_exception(shard.problem());
  } catch (const DataError& error) {
    EXPECT_EQ(std::string(error.what()), packed.path + " has " + std::to_string(longer.size()) +
                                             " bytes, but test.index.json says " + std::to_string(packed.bytes.size()) +
                                             ": the shard was cut short or changed since it was packed");
  }
}

}  // namespace
}  // namespace lockstep::testing
