// Record lookup and the two text sinks (JSON Lines and CSV), plus reading JSON Lines back.
#include "lockstep/train/metrics_sink.h"

#include <cerrno>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <c10/util/StringUtil.h>
#include <nlohmann/json.hpp>

#include "lockstep/error.h"

namespace lockstep::train {
namespace {

// Keys in file order, so that a line reads phase, epoch, step, time, then the values.
using Json = nlohmann::ordered_json;

const char* const kRecordKeys[] = {"phase", "epoch", "epochs", "step", "total_steps", "time"};

bool is_record_key(const std::string& key) {
  for (const char* known : kRecordKeys) {
    if (key == known) return true;
  }
  return false;
}

// Opens `path` for appending, creating its directory, so a sink can be pointed at a new run.
std::ofstream open_for_append(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ignored;  // a failure shows when opening the file
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  std::ofstream file(path, std::ios::app);
  if (!file) throw Error(path + ": cannot open for appending: " + std::strerror(errno));
  return file;
}

class JsonLinesSink : public MetricsSink {
 public:
  explicit JsonLinesSink(const std::string& path) : path_(path), file_(open_for_append(path)) {}

  void write(const Record& record) override {
    Json line = {{"phase", record.phase},
                 {"epoch", record.epoch},
                 {"epochs", record.epochs},
                 {"step", record.step},
                 {"total_steps", record.total_steps},
                 {"time", record.elapsed_seconds}};
    if (!record.message.empty()) line["message"] = record.message;
    for (const auto& [name, value] : record.values) line[name] = value;  // NaN is written as null
    // Flushed per line: a killed run keeps everything it logged.
    file_ << line.dump() << std::endl;
    if (!file_) throw Error(path_ + ": cannot write metrics: " + std::strerror(errno));
  }

  void flush() override { file_.flush(); }

 private:
  std::string path_;
  std::ofstream file_;
};

// Shortest text that reads back as the same double ("0.1", not "0.10000000000000001").
std::string number_text(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// Quoted only when needed, as RFC 4180 says.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::vector<std::string> split_at_commas(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0; start < text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

const std::string kCsvFixedColumns = "phase,epoch,step,time";

class CsvSink : public MetricsSink {
 public:
  explicit CsvSink(const std::string& path) : path_(path) {
    // A resumed run appends under the header already there and must keep its columns.
    std::ifstream existing(path);
    std::string header;
    if (std::getline(existing, header) && !header.empty()) {
      has_header_ = true;
      if (header.rfind(kCsvFixedColumns, 0) != 0) {
        throw Error(path + ":1: not a lockstep metrics CSV (header does not start with " + kCsvFixedColumns + ")");
      }
      names_ = split_at_commas(header.substr(std::min(header.size(), kCsvFixedColumns.size() + 1)));
    }
    file_ = open_for_append(path);
  }

  void write(const Record& record) override {
    std::vector<std::string> names;
    for (const auto& entry : record.values) names.push_back(csv_field(entry.first));
    if (!has_header_) {
      names_ = names;
      file_ << kCsvFixedColumns << (names.empty() ? "" : ",") << c10::Join(",", names) << "\n";
      has_header_ = true;
    } else if (names != names_) {
      throw Error(path_ + ": a " + record.phase + " record has values " + c10::Join(",", names) +
                  " but the CSV columns are " + c10::Join(",", names_) +
                  " (use one CSV per set of values, or JSON Lines)");
    }
    file_ << csv_field(record.phase) << "," << record.epoch << "," << record.step << ","
          << number_text(record.elapsed_seconds);
    for (const auto& entry : record.values) file_ << "," << number_text(entry.second);
    file_ << std::endl;
    if (!file_) throw Error(path_ + ": cannot write metrics: " + std::strerror(errno));
  }

  void flush() override { file_.flush(); }

 private:
  std::string path_;
  std::ofstream file_;
  bool has_header_ = false;
  std::vector<std::string> names_;  // as written in the header
};

int64_t integer_field(const Json& line, const char* key, const std::string& where) {
  const auto found = line.find(key);
  if (found == line.end()) return 0;
  if (!found->is_number_integer()) throw DataError(where + "'" + key + "' is not an integer: " + found->dump());
  return found->get<int64_t>();
}

Record parse_record(const std::string& text, const std::string& where) {
  Json line;
  try {
    line = Json::parse(text);
  } catch (const Json::parse_error& error) {
    throw DataError(where + "not JSON: " + error.what());
  }
  if (!line.is_object()) throw DataError(where + "not a JSON object: " + text);
  const auto phase = line.find("phase");
  if (phase == line.end() || !phase->is_string()) throw DataError(where + "no \"phase\" string");
  Record record;
  record.phase = phase->get<std::string>();
  record.epoch = integer_field(line, "epoch", where);
  record.epochs = integer_field(line, "epochs", where);
  record.step = integer_field(line, "step", where);
  record.total_steps = integer_field(line, "total_steps", where);
  if (line.contains("message") && line["message"].is_string()) record.message = line["message"].get<std::string>();
  for (const auto& [key, value] : line.items()) {
    if ((is_record_key(key) && key != "time") || key == "message") continue;  // read above
    double number = std::numeric_limits<double>::quiet_NaN();                 // JSON has no NaN; it was written as null
    if (value.is_number()) {
      number = value.get<double>();
    } else if (!value.is_null()) {
      throw DataError(where + "'" + key + "' is not a number: " + value.dump());
    }
    if (key == "time") {
      record.elapsed_seconds = number;
    } else {
      record.values.emplace_back(key, number);
    }
  }
  return record;
}

}  // namespace

double Record::value(const std::string& name) const {
  for (const auto& [key, number] : values) {
    if (key == name) return number;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::unique_ptr<MetricsSink> json_lines_sink(const std::string& path) { return std::make_unique<JsonLinesSink>(path); }

std::unique_ptr<MetricsSink> csv_sink(const std::string& path) { return std::make_unique<CsvSink>(path); }

std::vector<Record> read_json_lines(const std::string& path) {
  if (!std::filesystem::exists(path)) throw DataError(path + ": no such file");
  std::ifstream file(path);
  if (!file) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::vector<Record> records;
  std::string text;
  for (int line = 1; std::getline(file, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    records.push_back(parse_record(text, path + ":" + std::to_string(line) + ": "));
  }
  return records;
}

}  // namespace lockstep::train
