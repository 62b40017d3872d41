// Progress for people: a bar redrawn in place on a terminal, plain lines in a log file.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lockstep/comm/init.h"
#include "lockstep/train/metrics_sink.h"

namespace lockstep::train {
namespace {

constexpr int kBarWidth = 20;

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Accuracies are fractions in [0, 1] and read best as percentages.
std::string value_text(const std::string& name, double value) {
  if (name == "loss") return "loss " + fixed(value, 4);
  if (name == "top1" || name == "top5") return name + " " + fixed(100 * value, 1) + "%";
  if (name == "samples_per_second") return fixed(value, 0) + " samples/s";
  if (name == "data_wait") return "waited for data " + fixed(100 * value, 1) + "%";
  if (name == "samples") return fixed(value, 0) + " samples";
  char text[64];
  std::snprintf(text, sizeof text, "%.4g", value);
  return name + " " + text;
}

// "45s", "1m23s", "2h05m": precise enough for an estimate, short enough for one line.
std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long whole = std::llround(seconds);
  char text[32];
  if (whole < 60) {
    std::snprintf(text, sizeof text, "%llds", whole);
  } else if (whole < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", whole / 60, whole % 60);
  } else {
    std::snprintf(text, sizeof text, "%lldh%02lldm", whole / 3600, whole % 3600 / 60);
  }
  return text;
}

// Steps still to go at the average pace so far.
std::string eta_text(const Record& record) {
  if (record.step <= 0 || record.total_steps <= 0) return "?";
  const double left = static_cast<double>(std::max<int64_t>(0, record.total_steps - record.step));
  return duration_text(record.elapsed_seconds * left / static_cast<double>(record.step));
}

std::string progress_bar(const Record& record) {
  int filled = 0;
  if (record.total_steps > 0) {
    filled = static_cast<int>(std::clamp<int64_t>(kBarWidth * record.step / record.total_steps, 0, kBarWidth));
  }
  std::string bar(filled, '=');
  if (filled < kBarWidth) bar += '>';
  bar.resize(kBarWidth, ' ');
  return "[" + bar + "]";
}

std::string values_text(const Record& record) {
  std::string text;
  for (const auto& [name, value] : record.values) text += " " + value_text(name, value);
  return text;
}

std::string epoch_text(const Record& record) {
  return "epoch " + std::to_string(record.epoch) + "/" + std::to_string(record.epochs);
}

// "epoch 2/5 val loss 0.3012 top1 89.4% top5 99.8%"
std::string evaluation_line(const Record& record) {
  return epoch_text(record) + " " + record.phase + values_text(record);
}

class ConsoleSink : public MetricsSink {
 public:
  ConsoleSink(std::ostream& out, bool interactive) : out_(out), interactive_(interactive) {}

  void write(const Record& record) override {
    if (record.phase == "notice") {
      end_bar();
      out_ << epoch_text(record) << " notice: " << record.message << "\n";
    } else if (record.phase != "train") {
      end_bar();
      out_ << evaluation_line(record) << "\n";
    } else if (interactive_) {
      // "epoch 2/5 [=====>    ] 1234/4690 ETA 1m23s loss 0.3412 ...", drawn over the last one
      std::string line = epoch_text(record) + " " + progress_bar(record) + " " + std::to_string(record.step) + "/" +
                         std::to_string(record.total_steps) + " ETA " + eta_text(record) + values_text(record);
      const size_t width = line.size();
      if (width < bar_width_) line.append(bar_width_ - width, ' ');  // wipe a longer previous line
      // "\r" after the text, not before: a reader splitting at '\r' (the launcher) gets each
      // update as soon as it is written.
      out_ << line << "\r";
      bar_width_ = width;
    } else {
      out_ << epoch_text(record) << " step " << record.step << "/" << record.total_steps << " ETA " << eta_text(record)
           << values_text(record) << "\n";
    }
    out_.flush();
  }

  // End of an epoch: the bar's last state stays on screen as that epoch's summary.
  void flush() override {
    end_bar();
    out_.flush();
  }

 private:
  void end_bar() {
    if (bar_width_ > 0) out_ << "\n";
    bar_width_ = 0;
  }

  std::ostream& out_;
  bool interactive_;
  size_t bar_width_ = 0;  // of the bar line on screen, 0 when none
};

}  // namespace

std::unique_ptr<MetricsSink> console_sink(std::ostream& out, bool interactive) {
  return std::make_unique<ConsoleSink>(out, interactive);
}

bool interactive_console() {
  const char* launcher_terminal = std::getenv("LOCKSTEP_TERMINAL");
  if (launcher_terminal != nullptr && std::string(launcher_terminal) == "1") return true;
  if (launched()) return false;  // a launcher's pipe or pty, perhaps into a log
  return isatty(STDOUT_FILENO) != 0;
}

}  // namespace lockstep::train
