// TensorBoard event files, checked by a reader written here from the formats' specifications
// (TFRecord framing, protocol buffer wire format), sharing nothing with the writer but crc32c.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/train/metrics_sink.h"
#include "support/tool_process.h"
#include "train/sinks/tensorboard_events.h"

namespace lockstep::testing {
namespace {

using train::tensorboard::crc32c;

uint64_t little_endian(const std::string& bytes, size_t at, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes.at(at + i));
  return value;
}

uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// TFRecord: length (8), masked CRC of the length (4), payload, masked CRC of the payload (4).
std::vector<std::string> read_tfrecords(const std::string& bytes) {
  std::vector<std::string> payloads;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_GE(bytes.size() - at, 12u) << "truncated header at byte " << at;
    if (bytes.size() - at < 12) break;
    const uint64_t length = little_endian(bytes, at, 8);
    EXPECT_EQ(little_endian(bytes, at + 8, 4), mask(crc32c(bytes.data() + at, 8))) << "length CRC at byte " << at;
    EXPECT_GE(bytes.size() - at - 12, length + 4) << "truncated payload at byte " << at;
    if (bytes.size() - at - 12 < length + 4) break;
    const std::string payload = bytes.substr(at + 12, length);
    EXPECT_EQ(little_endian(bytes, at + 12 + length, 4), mask(crc32c(payload.data(), payload.size())))
        << "payload CRC at byte " << at;
    payloads.push_back(payload);
    at += 12 + length + 4;
  }
  return payloads;
}

// One protocol buffer field: varint and fixed fields in `number`, length-delimited in `bytes`.
struct Field {
  uint32_t tag = 0;
  int wire = 0;
  uint64_t number = 0;
  std::string bytes;
};

uint64_t read_varint(const std::string& message, size_t& at) {
  uint64_t value = 0;
  for (int shift = 0; at < message.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(message[at++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  ADD_FAILURE() << "unterminated varint";
  return value;
}

std::vector<Field> read_fields(const std::string& message) {
  std::vector<Field> fields;
  for (size_t at = 0; at < message.size();) {
    Field field;
    const uint64_t key = read_varint(message, at);
    field.tag = static_cast<uint32_t>(key >> 3);
    field.wire = static_cast<int>(key & 7);
    if (field.wire == 0) {
      field.number = read_varint(message, at);
    } else if (field.wire == 1 || field.wire == 5) {
      const int size = field.wire == 1 ? 8 : 4;
      field.number = little_endian(message, at, size);
      at += size;
    } else if (field.wire == 2) {
      const uint64_t length = read_varint(message, at);
      field.bytes = message.substr(at, length);
      at += length;
    } else {
      ADD_FAILURE() << "unexpected wire type " << field.wire;
      break;
    }
    fields.push_back(field);
  }
  return fields;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;  // tag, simple_value
};

// Event {1: double wall_time, 2: int64 step, 3: string file_version, 5: Summary summary};
// Summary {1: repeated Value value}; Value {1: string tag, 2: float simple_value}.
Event decode_event(const std::string& payload) {
  Event event;
  for (const Field& field : read_fields(payload)) {
    if (field.tag == 1 && field.wire == 1) {
      std::memcpy(&event.wall_time, &field.number, 8);
    } else if (field.tag == 2 && field.wire == 0) {
      event.step = static_cast<int64_t>(field.number);
    } else if (field.tag == 3 && field.wire == 2) {
      event.file_version = field.bytes;
    } else if (field.tag == 5 && field.wire == 2) {
      for (const Field& value : read_fields(field.bytes)) {
        EXPECT_EQ(value.tag, 1u);
        std::pair<std::string, float> scalar;
        for (const Field& part : read_fields(value.bytes)) {
          if (part.tag == 1 && part.wire == 2) scalar.first = part.bytes;
          if (part.tag == 2 && part.wire == 5) {
            const auto bits = static_cast<uint32_t>(part.number);
            std::memcpy(&scalar.second, &bits, 4);
          }
        }
        event.scalars.push_back(scalar);
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << field.tag << " of wire type " << field.wire;
    }
  }
  return event;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::vector<Event> read_events(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  std::vector<Event> events;
  for (const auto& payload : read_tfrecords(bytes.str())) events.push_back(decode_event(payload));
  return events;
}

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(TensorBoard, Crc32cMatchesTheStandardCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TensorBoard, EventFileReadsBackWithTagsStepsAndValues) {
  TemporaryDirectory dir;
  const std::string logs = dir.path() + "/run/tensorboard";  // created by the sink
  const double before = now();
  auto sink = train::tensorboard_sink(logs);
  sink->write({"train", 1, 2, 10, 40, 3.5, {{"loss", 2.302585}, {"top1", 0.125}}});
  sink->write({"val", 1, 2, 20, 40, 7.0, {{"loss", 1.75}}});
  sink->write({"train", 2, 2, 40, 40, 9.0, {{"loss", -0.0}, {"lr", 1e-7}}});

  // Read while the sink is still open: each record is flushed for a TensorBoard watching live.
  const auto files = event_files(logs);
  ASSERT_EQ(files.size(), 1u);
  const std::string name = std::filesystem::path(files[0]).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const auto events = read_events(files[0]);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].scalars.empty());
  EXPECT_GE(events[0].wall_time, before - 1);
  EXPECT_LE(events[0].wall_time, now() + 1);

  const std::vector<std::tuple<int64_t, std::string, float>> expected = {{10, "train/loss", 2.302585f},
                                                                         {10, "train/top1", 0.125f},
                                                                         {20, "val/loss", 1.75f},
                                                                         {40, "train/loss", -0.0f},
                                                                         {40, "train/lr", 1e-7f}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const Event& event = events.at(i + 1);
    EXPECT_EQ(event.step, std::get<0>(expected[i])) << "event " << i + 1;
    ASSERT_EQ(event.scalars.size(), 1u) << "event " << i + 1;
    EXPECT_EQ(event.scalars[0].first, std::get<1>(expected[i]));
    EXPECT_EQ(event.scalars[0].second, std::get<2>(expected[i])) << std::get<1>(expected[i]);
    EXPECT_TRUE(event.file_version.empty());
    EXPECT_GE(event.wall_time, events[0].wall_time);
  }
}

TEST(TensorBoard, LargeStepsNeedMultiByteVarints) {
  const std::string payload = train::tensorboard::scalar_event(1.5, 300000000000, "train/loss", 0.5f);
  const Event event = decode_event(payload);
  EXPECT_EQ(event.wall_time, 1.5);
  EXPECT_EQ(event.step, 300000000000);
  ASSERT_EQ(event.scalars.size(), 1u);
  EXPECT_EQ(event.scalars[0], std::make_pair(std::string("train/loss"), 0.5f));
  const auto records = read_tfrecords(train::tensorboard::tfrecord(payload));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0], payload);
}

TEST(TensorBoard, ASecondSinkInTheSameSecondWritesItsOwnFile) {
  TemporaryDirectory dir;
  auto first = train::tensorboard_sink(dir.path());
  auto second = train::tensorboard_sink(dir.path());
  first->write({"train", 1, 1, 1, 1, 0, {{"loss", 1}}});
  second->write({"train", 1, 1, 1, 1, 0, {{"loss", 2}}});
  const auto files = event_files(dir.path());
  ASSERT_EQ(files.size(), 2u);
  for (const auto& file : files) EXPECT_EQ(read_events(file).size(), 2u) << file;
}

}  // namespace
}  // namespace lockstep::testing
