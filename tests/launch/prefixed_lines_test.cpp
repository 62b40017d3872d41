#include "launch/prefixed_lines.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace lockstep::launch {
namespace {

// A pipe standing in for the launcher's stdout; read back what was written so far.
class PrefixedLinesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(pipe2(fds_, O_NONBLOCK), 0); }
  void TearDown() override {
    close(fds_[0]);
    close(fds_[1]);
  }
  std::string written() {
    char buffer[4096];
    ssize_t got = read(fds_[0], buffer, sizeof buffer);
    return got > 0 ? std::string(buffer, static_cast<std::size_t>(got)) : "";
  }
  int destination() const { return fds_[1]; }

 private:
  int fds_[2] = {-1, -1};
};

TEST_F(PrefixedLinesTest, WritesOnlyWholeLinesEachPrefixed) {
  PrefixedLines lines("[rank 3] ", destination());
  lines.append("first\nsec", 9);
  EXPECT_EQ(written(), "[rank 3] first\n");
  lines.append("ond\nthird\n", 10);
  EXPECT_EQ(written(), "[rank 3] second\n[rank 3] third\n");
}

TEST_F(PrefixedLinesTest, FlushEndsAnUnfinishedLine) {
  PrefixedLines lines("[rank 0] ", destination());
  lines.append("50% done", 8);
  EXPECT_EQ(written(), "");
  lines.flush();
  EXPECT_EQ(written(), "[rank 0] 50% done\n");
  lines.flush();
  EXPECT_EQ(written(), "");
}

TEST_F(PrefixedLinesTest, EmptyLinesKeepTheirPrefix) {
  PrefixedLines lines("[rank 1] ", destination());
  lines.append("\n\n", 2);
  EXPECT_EQ(written(), "[rank 1] \n[rank 1] \n");
}

TEST_F(PrefixedLinesTest, ForwardAvailableReadsUntilEndOfFile) {
  int source[2];
  ASSERT_EQ(pipe2(source, O_NONBLOCK), 0);
  PrefixedLines lines("[rank 2] ", destination());
  ASSERT_EQ(write(source[1], "a\nb", 3), 3);
  EXPECT_TRUE(forward_available(source[0], lines));
  EXPECT_EQ(written(), "[rank 2] a\n");
  close(source[1]);
  EXPECT_FALSE(forward_available(source[0], lines));
  close(source[0]);
}

}  // namespace
}  // namespace lockstep::launch
