// The summary's split of each step as stacked bars, a standalone SVG like curves.svg.
#include <algorithm>
#include <cstdio>
#include <map>

#include "timeline/summary.h"

namespace lockstep::timeline::detail {
namespace {

constexpr double kWidth = 720, kHeight = 360, kLeft = 64, kRight = 150, kTop = 40, kBottom = 44;

struct Part {
  const char* name;
  const char* color;
  double StepSplit::*value;
};
const Part kParts[] = {{"data wait", "#4e79a7", &StepSplit::data},
                       {"compute", "#59a14f", &StepSplit::compute},
                       {"exposed communication", "#e15759", &StepSplit::exposed}};

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string rect(double x, double y, double w, double h, const char* color) {
  return "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) + "\" height=\"" + number(h) +
         "\" fill=\"" + color + "\"/>\n";
}

std::string text(double x, double y, const std::string& content, const char* anchor = "start") {
  return "<text x=\"" + number(x) + "\" y=\"" + number(y) +
         "\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"" + anchor + "\">" + escaped(content) +
         "</text>\n";
}

// Per step, the median over ranks of each part.
std::vector<StepSplit> median_steps(const Summary& summary) {
  std::map<int64_t, std::vector<StepSplit>> by_step;
  for (const auto& r : summary.ranks) {
    for (const auto& s : r.steps) by_step[s.step].push_back(s);
  }
  std::vector<StepSplit> steps;
  for (const auto& [step, splits] : by_step) {
    RankSteps all{0, "", splits};
    StepSplit m = all.median();
    m.step = step;
    steps.push_back(m);
  }
  return steps;
}

}  // namespace

std::string summary_svg(const Summary& summary, const std::string& title) {
  const auto steps = median_steps(summary);
  double highest = 0;
  for (const auto& s : steps) highest = std::max(highest, s.data + s.compute + s.exposed);
  if (highest <= 0) highest = 1;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double bar_w = plot_w / std::max<size_t>(steps.size(), 1);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kWidth) + "\" height=\"" +
                    number(kHeight) + "\" viewBox=\"0 0 " + number(kWidth) + " " + number(kHeight) + "\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + number(kWidth) + "\" height=\"" + number(kHeight) + "\" fill=\"white\"/>\n";
  svg += text(kWidth / 2, 22, title, "middle");
  for (size_t i = 0; i < steps.size(); ++i) {
    double y = kTop + plot_h;
    for (const auto& part : kParts) {
      const double h = plot_h * (steps[i].*part.value) / highest;
      y -= h;
      svg += rect(kLeft + i * bar_w, y, std::max(bar_w * 0.85, 0.5), h, part.color);
    }
  }
  // Axes: milliseconds up the left, steps along the bottom.
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(kTop) + "\" x2=\"" + number(kLeft) + "\" y2=\"" +
         number(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(kTop + plot_h) + "\" x2=\"" + number(kLeft + plot_w) +
         "\" y2=\"" + number(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  svg += text(kLeft - 6, kTop + 4, number(highest) + " ms", "end");
  svg += text(kLeft - 6, kTop + plot_h, "0", "end");
  if (!steps.empty()) {
    svg += text(kLeft, kTop + plot_h + 16, "step " + std::to_string(steps.front().step));
    svg += text(kLeft + plot_w, kTop + plot_h + 16, "step " + std::to_string(steps.back().step), "end");
  }
  svg += text(kLeft + plot_w / 2, kHeight - 8, "each step: the median over ranks", "middle");
  double legend_y = kTop + 10;
  for (const auto& part : kParts) {
    svg += rect(kWidth - kRight + 12, legend_y - 9, 10, 10, part.color);
    svg += text(kWidth - kRight + 28, legend_y, part.name);
    legend_y += 18;
  }
  return svg + "</svg>\n";
}

}  // namespace lockstep::timeline::detail
