#pragma once

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::train {

// Fashion-MNIST packed in 256 KB shards (about 100 examples each), and a registry naming it
// fashion-shards.
struct PackedFashion {
  PackedFashion() {
    const auto packed = testing::run_process(
        {LOCKSTEP_TOOL, "data", "pack", "--out", folder.path() + "/shards", "--shard-size", "256KB"});
    EXPECT_EQ(packed.exit_code, 0) << packed.output;
    std::ofstream(registry()) << "[fashion-shards]\ntype = \"shards\"\npath = \"shards\"\n";
  }
  std::string registry() const { return folder.path() + "/Data.toml"; }
  testing::TemporaryDirectory folder;
};

}  // namespace lockstep::train
