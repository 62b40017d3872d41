#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lockstep/error.h"
#include "lockstep/timeline.h"
#include "timeline/events.h"
#include "timeline/trace_file.h"

namespace lockstep::timeline {
namespace detail {

nlohmann::json read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError(path + ": no such timeline file");
  std::stringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  // A rank that ended without stop() left its array open, as the trace format allows.
  auto parsed = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) parsed = nlohmann::json::parse(content + "\n]", nullptr, false);
  if (parsed.is_discarded()) throw DataError(path + ": not a timeline (its JSON does not parse)");
  if (parsed.is_object() && parsed.contains("traceEvents")) parsed = parsed["traceEvents"];
  if (!parsed.is_array()) throw DataError(path + ": not a timeline (no array of trace events)");
  // Files from before the format had a version are version 1.
  for (const auto& event : parsed) {
    if (event.value("ph", "") != "M" || event.value("name", "") != format::event::kFormat) continue;
    const int version = event.value("args", nlohmann::json::object()).value(format::key::kVersion, 0);
    if (version > format::kFormatVersion) {
      throw DataError(path + ": a timeline of format " + std::to_string(version) +
                      ", newer than this lockstep reads (" + std::to_string(format::kFormatVersion) +
                      "); read it with the lockstep that wrote it");
    }
  }
  return parsed;
}

}  // namespace detail

void merge(const std::vector<std::string>& files, const std::string& out) {
  nlohmann::json metadata = nlohmann::json::array(), events = nlohmann::json::array();
  for (const auto& file : files) {
    for (auto& event : detail::read_trace(file)) {
      (event.value("ph", "") == "M" ? metadata : events).push_back(std::move(event));
    }
  }
  // Each track in time order; events of one time keep the order they were recorded in, so
  // that a span's begin stays before what it holds.
  std::stable_sort(events.begin(), events.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    const auto key = [](const nlohmann::json& e) {
      return std::make_tuple(e.value("pid", 0), e.value("tid", 0), e.value("ts", 0.0));
    };
    return key(a) < key(b);
  });
  const std::string temporary = out + ".tmp";
  {
    std::ofstream file(temporary);
    if (!file) throw ConfigError("lockstep timeline merge: cannot write " + out);
    file << "[\n";
    bool first = true;
    for (const auto* part : {&metadata, &events}) {
      for (const auto& event : *part) {
        file << (first ? "" : ",\n") << event.dump();
        first = false;
      }
    }
    file << "\n]\n";
    if (!file) throw ConfigError("lockstep timeline merge: cannot write " + out);
  }
  std::rename(temporary.c_str(), out.c_str());
}

}  // namespace lockstep::timeline
