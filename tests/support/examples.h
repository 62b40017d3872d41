#pragma once

#include <string>

#include <gtest/gtest.h>

// For a test that runs one of the examples (a path its CMakeLists defines, "" where the
// examples are not built): skips it, saying why, in a build without them.
#define LOCKSTEP_SKIP_WITHOUT_EXAMPLE(example)                                              \
  if (std::string(example).empty()) {                                                       \
    GTEST_SKIP() << #example " is not built (configured with LOCKSTEP_BUILD_EXAMPLES=OFF)"; \
  }
