// TensorBoard event files: TFRecord framing around Event protocol buffers with scalar
// summaries, which is all TensorBoard's scalar dashboard reads.
//
// The protocol buffers are encoded by hand: three tiny messages (Event, Summary, Value) need
// about forty lines of varint and fixed-width encoding, where protoc and libprotobuf would
// add a code generator and a library to the build for them.
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "lockstep/error.h"
#include "lockstep/train/metrics_sink.h"
#include "train/sinks/tensorboard_events.h"

namespace lockstep::train {
namespace tensorboard {
namespace {

// CRC32C lives here because zlib, the checksum library already linked, has only CRC-32 (the
// Ethernet polynomial); TFRecord uses Castagnoli's. Table-driven, reflected polynomial.
constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? kCastagnoliReflected : 0u);
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = crc32c_table();

// Protocol buffer wire types.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out += static_cast<char>((value & 0x7f) | 0x80);
  out += static_cast<char>(value);
}

void put_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

void put_key(std::string& out, uint32_t field, WireType wire) { put_varint(out, (field << 3) | wire); }

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits, 4);
}

void put_int64(std::string& out, uint32_t field, int64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(value));  // negative int64 is ten bytes, as protobuf says
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// Field numbers from tensorflow/core/util/event.proto and framework/summary.proto.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2;

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& payload) {
  std::string length;
  put_little_endian(length, payload.size(), 8);
  std::string record = length;
  put_little_endian(record, masked_crc32c(length.data(), length.size()), 4);
  record += payload;
  put_little_endian(record, masked_crc32c(payload.data(), payload.size()), 4);
  return record;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, kValueTag, tag);
  put_float(summary_value, kValueSimpleValue, value);
  std::string summary;
  put_bytes(summary, kSummaryValue, summary_value);
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  put_int64(event, kEventStep, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string file_version_event(double wall_time) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

}  // namespace tensorboard

namespace {

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// TensorBoard's own name, so that its directory scan finds the file; a second sink started in
// the same second gets a numbered name instead of overwriting the first one's file.
std::string new_event_file_path(const std::string& dir) {
  const std::string base = dir + "/events.out.tfevents." + std::to_string(std::time(nullptr)) + "." + host_name();
  std::string path = base;
  for (int copy = 2; std::filesystem::exists(path); ++copy) path = base + "." + std::to_string(copy);
  return path;
}

class TensorBoardSink : public MetricsSink {
 public:
  explicit TensorBoardSink(const std::string& dir) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw Error(dir + ": cannot create the TensorBoard directory: " + error.message());
    path_ = new_event_file_path(dir);
    file_.open(path_, std::ios::binary);
    if (!file_) throw Error(path_ + ": cannot create: " + std::strerror(errno));
    append(tensorboard::file_version_event(seconds_since_epoch()));
    file_.flush();
  }

  void write(const Record& record) override {
    const double now = seconds_since_epoch();
    for (const auto& [name, value] : record.values) {
      append(tensorboard::scalar_event(now, record.step, record.phase + "/" + name, static_cast<float>(value)));
    }
    file_.flush();  // TensorBoard reads the file while training runs
  }

  void flush() override { file_.flush(); }

 private:
  void append(const std::string& event) {
    file_ << tensorboard::tfrecord(event);
    if (!file_) throw Error(path_ + ": cannot write: " + std::strerror(errno));
  }

  std::string path_;
  std::ofstream file_;
};

}  // namespace

std::unique_ptr<MetricsSink> tensorboard_sink(const std::string& dir) { return std::make_unique<TensorBoardSink>(dir); }

}  // namespace lockstep::train
