#include "timeline/recorder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/transports/stream_marks.h"
#include "lockstep/comm/init.h"
#include "lockstep/error.h"
#include "lockstep/timeline.h"
#include "test_hooks/test_hooks.h"
#include "timeline/clock_offset.h"
#include "timeline/membership_mark.h"

namespace lockstep::timeline {
namespace detail {

std::atomic<bool> recording{false};

namespace {

struct Event {
  int rank;
  Track track;
  char phase;
  std::string name;
  double start_us;
  double end_us;
  std::string args;
};

// Each recording thread appends to its own buffer, so threads never wait on one another;
// the writer swaps a buffer out under its (then uncontended) lock.
struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;
};

// A span of device work whose times the device has not given yet.
struct DeviceSpan {
  Event event;  // its start_us and end_us still to come
  std::shared_ptr<StreamMark> start, end;
  double called_us;
};

// One rank's open file.
struct RankFile {
  std::FILE* file = nullptr;
  std::string path;
  double offset_us = 0;  // added to this rank's times: rank 0's clock minus its own
};

const char* track_name(Track track) {
  switch (track) {
    case Track::training: return "training loop";
    case Track::buckets: return "DDP buckets";
    case Track::collectives: return "collectives";
    case Track::marks: return "marks";
  }
  return "";
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

class Recorder {
 public:
  ~Recorder() {
    {
      std::lock_guard<std::mutex> lock(wake_mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) writer_.join();
    {
      // As the process exits CUDA may be gone: the marks are neither asked nor destroyed.
      std::lock_guard<std::mutex> lock(device_mutex_);
      new std::list<DeviceSpan>(std::move(device_spans_));
    }
    flush();
    std::lock_guard<std::mutex> lock(files_mutex_);
    for (auto& [rank, open] : files_) close(open);
  }

  void append(Event event) {
    thread_local std::shared_ptr<ThreadBuffer> mine;
    if (!mine) {
      mine = std::make_shared<ThreadBuffer>();
      std::lock_guard<std::mutex> lock(buffers_mutex_);
      buffers_.push_back(mine);
    }
    std::lock_guard<std::mutex> lock(mine->mutex);
    mine->events.push_back(std::move(event));
  }

  void open(int rank, const std::string& path, double offset_us) {
    {
      std::lock_guard<std::mutex> lock(files_mutex_);
      if (files_.count(rank) != 0) {
        throw ConfigError("lockstep timeline: rank " + std::to_string(rank) + " records into " + files_[rank].path +
                          " already (LOCKSTEP_TIMELINE, or timeline::start called twice)");
      }
    }
    std::error_code ignored;
    const auto folder = std::filesystem::path(path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ignored);
    std::FILE* file = std::fopen(path.c_str(), "w");
    if (file == nullptr) throw ConfigError("lockstep timeline: cannot write " + path);
    std::fprintf(file, "[\n");
    write_metadata(file, rank, offset_us);
    {
      std::lock_guard<std::mutex> lock(files_mutex_);
      files_[rank] = RankFile{file, path, offset_us};
    }
    recording.store(true);
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (!writer_.joinable()) writer_ = std::thread([this] { write_in_background(); });
  }

  void append_device_span(DeviceSpan span) {
    std::lock_guard<std::mutex> lock(device_mutex_);
    device_spans_.push_back(std::move(span));
  }

  std::string close(int rank) {
    {
      std::lock_guard<std::mutex> lock(device_mutex_);
      for (auto& span : device_spans_) {
        if (span.event.rank != rank) continue;
        span.start->wait_steady_us();  // marks of two streams may pass in either order
        span.end->wait_steady_us();
      }
    }
    flush();
    {
      std::lock_guard<std::mutex> lock(device_mutex_);  // what the device could not time
      device_spans_.remove_if([rank](const DeviceSpan& span) { return span.event.rank == rank; });
    }
    std::lock_guard<std::mutex> lock(files_mutex_);
    const auto found = files_.find(rank);
    if (found == files_.end()) return "";
    const std::string path = found->second.path;
    close(found->second);
    files_.erase(found);
    if (files_.empty()) recording.store(false);
    return path;
  }

 private:
  void write_metadata(std::FILE* file, int rank, double offset_us) {
    const std::string name = "rank " + std::to_string(rank) + " on " + host_name();
    std::fprintf(file,
                 "{\"name\": %s, \"ph\": \"M\", \"pid\": %d, \"args\": {\"%s\": %d}},\n"
                 "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": %s, "
                 "\"%s\": %.3f}},\n"
                 "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"sort_index\": %d}}",
                 quoted(event::kFormat).c_str(), rank, key::kVersion, format::kFormatVersion, rank,
                 quoted(name).c_str(), key::kClockOffsetUs, offset_us, rank, rank);
    for (Track track : {Track::training, Track::buckets, Track::collectives, Track::marks}) {
      std::fprintf(
          file, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
          rank, static_cast<int>(track), track_name(track));
    }
  }

  static void close(RankFile& open) {
    std::fprintf(open.file, "\n]\n");
    std::fclose(open.file);
    open.file = nullptr;
  }

  void write_in_background() {
    std::unique_lock<std::mutex> lock(wake_mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      flush();
      lock.lock();
    }
  }

  // The device spans whose marks the device passed, as events, in the order they came.
  std::vector<Event> passed_device_spans() {
    std::vector<Event> passed;
    std::lock_guard<std::mutex> lock(device_mutex_);
    for (auto span = device_spans_.begin(); span != device_spans_.end();) {
      const auto end = span->end->steady_us();
      const auto start = end ? span->start->steady_us() : std::nullopt;
      if (!start) {
        ++span;
        continue;
      }
      Event& e = span->event;
      const double offset = test_hooks::clock_offset_us(e.rank);
      e.start_us = *start + offset;
      e.end_us = std::max(*end, *start) + offset;
      if (span->called_us > 0) {
        e.args += std::string(", \"") + key::kQueuedUs + "\": " + std::to_string(e.start_us - span->called_us);
      }
      passed.push_back(std::move(e));
      span = device_spans_.erase(span);
    }
    return passed;
  }

  // Writes every buffered event into its rank's file; those of ranks not recording are dropped.
  void flush() {
    std::lock_guard<std::mutex> flushing(flush_mutex_);  // one writer at a time, in order
    std::vector<Event> events = passed_device_spans();
    {
      std::lock_guard<std::mutex> lock(buffers_mutex_);
      for (auto& buffer : buffers_) {
        std::lock_guard<std::mutex> own(buffer->mutex);
        if (events.empty()) {
          events.swap(buffer->events);
        } else {
          events.insert(events.end(), std::make_move_iterator(buffer->events.begin()),
                        std::make_move_iterator(buffer->events.end()));
          buffer->events.clear();
        }
      }
    }
    std::lock_guard<std::mutex> lock(files_mutex_);
    for (const Event& e : events) {
      const auto found = files_.find(e.rank);
      if (found == files_.end()) continue;
      const double ts = e.start_us + found->second.offset_us;
      std::fprintf(found->second.file, ",\n{\"name\": %s, \"ph\": \"%c\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f",
                   quoted(e.name).c_str(), e.phase, e.rank, static_cast<int>(e.track), ts);
      if (e.phase == 'X') std::fprintf(found->second.file, ", \"dur\": %.3f", e.end_us - e.start_us);
      if (e.phase == 'i') std::fprintf(found->second.file, ", \"s\": \"t\"");
      if (!e.args.empty()) std::fprintf(found->second.file, ", \"args\": {%s}", e.args.c_str());
      std::fprintf(found->second.file, "}");
    }
    for (auto& [rank, open] : files_) std::fflush(open.file);
  }

  std::mutex buffers_mutex_;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers_;
  std::mutex device_mutex_;
  std::list<DeviceSpan> device_spans_;
  std::mutex files_mutex_;
  std::map<int, RankFile> files_;
  std::mutex flush_mutex_;
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread writer_;
};

Recorder& recorder() {
  static Recorder instance;
  return instance;
}

}  // namespace

const std::string& prefix_from_environment() {
  static const std::string prefix = [] {
    const char* value = std::getenv("LOCKSTEP_TIMELINE");
    return std::string(value != nullptr ? value : "");
  }();
  return prefix;
}

double now_us(int rank) {
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return us + test_hooks::clock_offset_us(rank);
}

void record(int rank, Track track, char phase, const std::string& name, double start_us, double end_us,
            const Args& args) {
  recorder().append(Event{rank, track, phase, name, start_us, end_us, args.json()});
}

void record_device_span(int rank, Track track, const std::string& name, const std::string& device,
                        std::shared_ptr<StreamMark> start, std::shared_ptr<StreamMark> end, double called_us,
                        const Args& args) {
  Args with_device = args;
  with_device.add(key::kDevice, device);
  recorder().append_device_span(
      DeviceSpan{Event{rank, track, 'X', name, 0, 0, with_device.json()}, std::move(start), std::move(end), called_us});
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace detail

void start(const std::string& prefix, const ProcessGroup& group) {
  const int rank = lockstep::rank();
  const double offset = detail::measure_clock_offset(rank, group);
  detail::recorder().open(rank, prefix + ".rank-" + std::to_string(rank) + ".json", offset);
  detail::record_pending_membership_mark();
}

std::string stop() { return detail::recorder().close(lockstep::rank()); }

bool enabled() { return detail::on(); }

Span::Span(std::string name) : name_(std::move(name)) {
  if (!detail::on()) return;
  rank_ = lockstep::rank();
  detail::record(rank_, detail::Track::training, 'B', name_, detail::now_us(rank_));
}

Span::~Span() {
  if (rank_ >= 0) detail::record(rank_, detail::Track::training, 'E', name_, detail::now_us(rank_));
}

}  // namespace lockstep::timeline
