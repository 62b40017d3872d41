// The text sinks: JSON Lines written and read back exactly, CSV columns, console lines.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "lockstep/error.h"
#include "lockstep/train/metrics_sink.h"
#include "support/tool_process.h"

namespace lockstep::testing {
namespace {

using train::Record;

Record train_record() {
  return {"train", 2, 5, 1234, 4690, 83.25, {{"loss", 0.34123}, {"top1", 0.881}, {"samples_per_second", 1320.4}}};
}

Record val_record() { return {"val", 2, 5, 1876, 4690, 120.5, {{"loss", 0.3012}, {"top1", 0.894}, {"top5", 0.998}}}; }

void expect_same(const Record& read, const Record& written) {
  EXPECT_EQ(read.phase, written.phase);
  EXPECT_EQ(read.epoch, written.epoch);
  EXPECT_EQ(read.epochs, written.epochs);
  EXPECT_EQ(read.step, written.step);
  EXPECT_EQ(read.total_steps, written.total_steps);
  EXPECT_EQ(read.elapsed_seconds, written.elapsed_seconds);
  EXPECT_EQ(read.values, written.values);
}

template <typename Exception>
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Exception& error) {
    return error.what();
  }
  return "no error";
}

TEST(JsonLines, RecordsReadBackExactlyInOrder) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  Record odd = train_record();
  odd.values = {{"loss", 0.1}, {"lr", 1e-5 / 3}};
  train::json_lines_sink(path)->write(train_record());
  {
    auto sink = train::json_lines_sink(path);
    sink->write(val_record());
    sink->write(odd);
  }
  const auto records = train::read_json_lines(path);
  ASSERT_EQ(records.size(), 3u);
  expect_same(records[0], train_record());
  expect_same(records[1], val_record());
  expect_same(records[2], odd);
  EXPECT_EQ(records[2].value("lr"), 1e-5 / 3);
  EXPECT_TRUE(std::isnan(records[2].value("top5")));
}

TEST(JsonLines, OneCompactObjectPerLineWrittenAtOnce) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  auto sink = train::json_lines_sink(path);
  sink->write({"val", 1, 3, 10, 30, 1.5, {{"loss", 0.25}}});
  // Not flushed or destroyed yet: a killed run keeps the line.
  EXPECT_EQ(read_file(path),
            "{\"phase\":\"val\",\"epoch\":1,\"epochs\":3,\"step\":10,\"total_steps\":30,\"time\":1.5,\"loss\":0.25}\n");
}

TEST(JsonLines, NanIsWrittenAsNullAndReadBackAsNan) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  train::json_lines_sink(path)->write({"train", 1, 1, 1, 1, 0, {{"loss", std::nan("")}}});
  EXPECT_TRUE(contains(read_file(path), "\"loss\":null")) << read_file(path);
  const auto records = train::read_json_lines(path);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(records[0].values.size(), 1u);
  EXPECT_TRUE(std::isnan(records[0].value("loss")));
}

TEST(JsonLines, AMalformedLineIsNamedByFileAndLine) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  train::json_lines_sink(path)->write(train_record());
  std::ofstream(path, std::ios::app) << "\n{\"phase\":\"train\",\"step\":\n";
  const std::string message = error_of<DataError>([&] { train::read_json_lines(path); });
  EXPECT_TRUE(contains(message, path + ":3: not JSON")) << message;

  std::ofstream(path) << "{\"phase\":\"train\",\"loss\":\"low\"}\n";
  const std::string not_number = error_of<DataError>([&] { train::read_json_lines(path); });
  EXPECT_EQ(not_number, path + ":1: 'loss' is not a number: \"low\"");
}

TEST(JsonLines, AMissingFileIsNamed) {
  const std::string message = error_of<DataError>([] { train::read_json_lines("/no/such/run/metrics.jsonl"); });
  EXPECT_EQ(message, "/no/such/run/metrics.jsonl: no such file");
}

TEST(Csv, HeaderFromTheFirstRecordThenOneRowEach) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/metrics.csv";
  {
    auto sink = train::csv_sink(path);
    sink->write({"train", 1, 2, 50, 100, 12.5, {{"loss", 0.5}, {"top1", 0.25}}});
    sink->write({"val", 1, 2, 50, 100, 14.0, {{"loss", 0.375}, {"top1", 0.3}}});
  }
  // A resumed run appends below the same header.
  train::csv_sink(path)->write({"train", 2, 2, 100, 100, 30.25, {{"loss", 0.125}, {"top1", 0.75}}});
  EXPECT_EQ(read_file(path),
            "phase,epoch,step,time,loss,top1\n"
            "train,1,50,12.5,0.5,0.25\n"
            "val,1,50,14,0.375,0.3\n"
            "train,2,100,30.25,0.125,0.75\n");
}

TEST(Csv, ARecordWithOtherValuesNamesFileAndColumns) {
  TemporaryDirectory dir;
  const std::string path = dir.path() + "/metrics.csv";
  auto sink = train::csv_sink(path);
  sink->write({"train", 1, 2, 50, 100, 12.5, {{"loss", 0.5}, {"samples_per_second", 900}}});
  const std::string message = error_of<Error>([&] {
    sink->write({"val", 1, 2, 50, 100, 14.0, {{"loss", 0.375}, {"top5", 0.9}}});
  });
  EXPECT_TRUE(contains(message, path + ": a val record has values loss,top5 but the CSV columns are "
                                       "loss,samples_per_second"))
      << message;
}

TEST(Console, PlainLinesWhenNotATerminal) {
  std::ostringstream out;
  auto sink = train::console_sink(out, false);
  sink->write(train_record());
  sink->write(val_record());
  sink->flush();
  // ETA: 83.25 s for 1234 steps, 3456 to go.
  EXPECT_EQ(out.str(),
            "epoch 2/5 step 1234/4690 ETA 3m53s loss 0.3412 top1 88.1% 1320 samples/s\n"
            "epoch 2/5 val loss 0.3012 top1 89.4% top5 99.8%\n");
}

TEST(Console, ABarRedrawnInPlaceOnATerminal) {
  std::ostringstream out;
  auto sink = train::console_sink(out, true);
  Record first = train_record();
  first.step = 469;
  first.elapsed_seconds = 30;
  sink->write(first);
  sink->write(train_record());
  sink->write(val_record());
  EXPECT_EQ(out.str(),
            "epoch 2/5 [==>                 ] 469/4690 ETA 4m30s loss 0.3412 top1 88.1% 1320 samples/s\r"
            "epoch 2/5 [=====>              ] 1234/4690 ETA 3m53s loss 0.3412 top1 88.1% 1320 samples/s\r"
            "\nepoch 2/5 val loss 0.3012 top1 89.4% top5 99.8%\n");
}

TEST(Console, AShorterBarLineWipesTheLongerOne) {
  std::ostringstream out;
  auto sink = train::console_sink(out, true);
  Record record = train_record();
  sink->write(record);
  record.values = {{"loss", 0.25}};
  record.step = 4690;
  sink->write(record);
  sink->flush();
  const size_t first_width = out.str().find('\r');
  const std::string last = out.str().substr(first_width + 1);
  EXPECT_TRUE(contains(last, "[====================] 4690/4690 ETA 0s loss 0.2500    ")) << last;
  EXPECT_EQ(last.substr(first_width), "\r\n");  // as wide as the first line, then the bar's end
}

// Sets (or, given nullptr, removes) an environment variable for as long as it lives.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedVariable() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Console, ABarOnlyOnATerminalOutsideALaunchOrWhenLockstepsLauncherSaysSo) {
  ScopedVariable no_rank("RANK", nullptr), no_lockstep_rank("LOCKSTEP_RANK", nullptr),
      no_mpi_rank("OMPI_COMM_WORLD_RANK", nullptr), no_terminal("LOCKSTEP_TERMINAL", nullptr);
  EXPECT_EQ(train::interactive_console(), isatty(STDOUT_FILENO) != 0);
  {
    ScopedVariable launched("OMPI_COMM_WORLD_RANK", "0");
    EXPECT_FALSE(train::interactive_console());  // mpirun's pty may lead to a log file
    ScopedVariable terminal("LOCKSTEP_TERMINAL", "1");
    EXPECT_TRUE(train::interactive_console());
  }
  ScopedVariable launched("RANK", "0"), piped("LOCKSTEP_TERMINAL", "0");
  EXPECT_FALSE(train::interactive_console());
}

}  // namespace
}  // namespace lockstep::testing
