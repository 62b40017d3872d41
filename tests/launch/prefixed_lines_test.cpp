// How the launcher writes its workers' output: whole prefixed lines, and on a terminal one
// progress bar that other lines are written above.
#include "launch/prefixed_lines.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "launch/terminal_output.h"

namespace lockstep::launch {
namespace {

// Pipes standing in for the launcher's stdout and stderr; read back what was written so far.
class LauncherOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipe2(out_, O_NONBLOCK), 0);
    ASSERT_EQ(pipe2(err_, O_NONBLOCK), 0);
  }
  void TearDown() override {
    for (int fd : {out_[0], out_[1], err_[0], err_[1]}) close(fd);
  }
  std::string written() { return read_back(out_[0]); }
  std::string written_to_stderr() { return read_back(err_[0]); }
  int destination() const { return out_[1]; }
  int stderr_destination() const { return err_[1]; }

 private:
  static std::string read_back(int fd) {
    char buffer[4096];
    ssize_t got = read(fd, buffer, sizeof buffer);
    return got > 0 ? std::string(buffer, static_cast<std::size_t>(got)) : "";
  }

  int out_[2] = {-1, -1};
  int err_[2] = {-1, -1};
};

class PrefixedLinesTest : public LauncherOutput {};
class TerminalOutputTest : public LauncherOutput {};

TEST_F(PrefixedLinesTest, WritesOnlyWholeLinesEachPrefixed) {
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 3] ", terminal, destination());
  lines.append("first\nsec", 9);
  EXPECT_EQ(written(), "[rank 3] first\n");
  lines.append("ond\nthird\n", 10);
  EXPECT_EQ(written(), "[rank 3] second\n[rank 3] third\n");
}

TEST_F(PrefixedLinesTest, FlushEndsAnUnfinishedLine) {
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 0] ", terminal, destination());
  lines.append("50% done", 8);
  EXPECT_EQ(written(), "");
  lines.flush();
  EXPECT_EQ(written(), "[rank 0] 50% done\n");
  lines.flush();
  EXPECT_EQ(written(), "");
}

TEST_F(PrefixedLinesTest, EmptyLinesKeepTheirPrefix) {
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 1] ", terminal, destination());
  lines.append("\n\n", 2);
  EXPECT_EQ(written(), "[rank 1] \n[rank 1] \n");
}

TEST_F(PrefixedLinesTest, ForwardAvailableReadsUntilEndOfFile) {
  int source[2];
  ASSERT_EQ(pipe2(source, O_NONBLOCK), 0);
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 2] ", terminal, destination());
  ASSERT_EQ(write(source[1], "a\nb", 3), 3);
  EXPECT_TRUE(forward_available(source[0], lines));
  EXPECT_EQ(written(), "[rank 2] a\n");
  close(source[1]);
  EXPECT_FALSE(forward_available(source[0], lines));
  close(source[0]);
}

TEST_F(PrefixedLinesTest, CarriageReturnsStayInsideTheLineWithoutBarUpdates) {
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 1] ", terminal, destination());
  const std::string text = "10%\r20%\n";
  lines.append(text.data(), text.size());
  EXPECT_EQ(written(), "[rank 1] 10%\r20%\n");
}

TEST_F(PrefixedLinesTest, BarUpdatesReplaceTheBarUnprefixedAndANewlineLeavesItAsALine) {
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 0] ", terminal, destination(), /*bar_updates=*/true);
  const std::string first = "step 1/8 ETA 7s\rstep 2/";
  lines.append(first.data(), first.size());
  EXPECT_EQ(written(), "\r\033[Kstep 1/8 ETA 7s\r");
  // The rest of the update, padded as console_sink pads it, then the bar's end and a line.
  const std::string rest = "8 ETA 6s  \r\nval loss 0.5\n";
  lines.append(rest.data(), rest.size());
  EXPECT_EQ(written(), "\r\033[Kstep 2/8 ETA 6s\r\n[rank 0] val loss 0.5\n");
  EXPECT_FALSE(terminal.bar_shown());
}

TEST_F(PrefixedLinesTest, AStreamThatClosesMidBarLeavesTheBarThenItsLastLine) {
  TerminalOutput terminal(destination());
  PrefixedLines lines("[rank 0] ", terminal, destination(), /*bar_updates=*/true);
  const std::string text = "step 3/8\rKilled";
  lines.append(text.data(), text.size());
  lines.flush();
  EXPECT_EQ(written(), "\r\033[Kstep 3/8\r\n[rank 0] Killed\n");
}

TEST_F(TerminalOutputTest, LinesPassUntouchedWhileNoBarIsShown) {
  TerminalOutput terminal(destination());
  terminal.write_line(destination(), "[rank 1] a\n");
  terminal.write_line(stderr_destination(), "[rank 1] b\n");
  EXPECT_EQ(written(), "[rank 1] a\n");
  EXPECT_EQ(written_to_stderr(), "[rank 1] b\n");
}

TEST_F(TerminalOutputTest, ALineIsWrittenAboveTheBarWhichIsDrawnAgain) {
  TerminalOutput terminal(destination());
  terminal.update_bar("epoch 1/1 ETA 3s");
  EXPECT_EQ(written(), "\r\033[Kepoch 1/1 ETA 3s\r");
  terminal.write_line(destination(), "[rank 1] hello\n");
  EXPECT_EQ(written(), "\r\033[K[rank 1] hello\nepoch 1/1 ETA 3s\r");
}

TEST_F(TerminalOutputTest, ALineForStderrLiftsTheBarOffStdoutAroundIt) {
  TerminalOutput terminal(destination());
  terminal.update_bar("epoch 1/1 ETA 3s");
  written();
  terminal.write_line(stderr_destination(), "lockstep run: got signal 2\n");
  EXPECT_EQ(written_to_stderr(), "lockstep run: got signal 2\n");
  EXPECT_EQ(written(), "\r\033[Kepoch 1/1 ETA 3s\r");
}

TEST_F(TerminalOutputTest, AnEndedBarStaysAsALineAndLaterLinesGoBelowIt) {
  TerminalOutput terminal(destination());
  terminal.update_bar("epoch 1/2 done");
  terminal.end_bar();
  terminal.end_bar();
  terminal.write_line(destination(), "[rank 0] val loss 0.5\n");
  EXPECT_EQ(written(), "\r\033[Kepoch 1/2 done\r\n[rank 0] val loss 0.5\n");
}

}  // namespace
}  // namespace lockstep::launch
