// Loss and accuracy curves as a standalone SVG: viewable in any browser, no plotting library.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "lockstep/train/metrics_sink.h"

namespace lockstep::train {
namespace {

constexpr int kWidth = 900, kHeight = 400, kPanelWidth = kWidth / 2;
// Plot area of a panel, relative to the panel's left edge.
constexpr double kPlotLeft = 70, kPlotRight = 425, kPlotTop = 68, kPlotBottom = 335;
const char* const kTrainColor = "#1f77b4";
const char* const kValColor = "#d62728";

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Points by step; a resumed run logs some steps twice, and the later value wins.
using Curve = std::map<int64_t, double>;

struct Curves {
  Curve train, val;
  bool empty() const { return train.empty() && val.empty(); }
};

Curves curves_of(const std::vector<Record>& records, const std::string& name, double scale) {
  Curves curves;
  for (const auto& record : records) {
    const double value = record.value(name) * scale;
    if (!std::isfinite(value)) continue;  // missing, NaN or a diverged run's inf
    if (record.phase == "train") curves.train[record.step] = value;
    if (record.phase == "val") curves.val[record.step] = value;
  }
  return curves;
}

// An axis from lo to hi with 4-6 round tick values (steps of 1, 2, 2.5 or 5 times a power of ten).
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  int decimals = 0;

  double fraction(double value) const { return (value - lo) / (hi - lo); }
};

Axis nice_axis(double lo, double hi) {
  if (!(hi - lo > 1e-9 * std::max(std::abs(lo), std::abs(hi)))) {  // one value (up to rounding): centre it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  // Of the steps giving 3-5 intervals, the one wasting least room (the larger step on a tie).
  // There is one: going down from a step larger than the range, each candidate is at most twice
  // the next, so the first to give at least three intervals gives at most five.
  const int exponent = static_cast<int>(std::floor(std::log10((hi - lo) / 4)));
  const double multiples[] = {5, 2.5, 2, 1};
  Axis best;
  double best_span = INFINITY;
  for (int power = exponent + 1; power >= exponent - 1; --power) {
    for (double multiple : multiples) {
      const double step = multiple * std::pow(10.0, power);
      const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
      if (last - first < 3 || last - first > 5 || (last - first) * step >= best_span * (1 - 1e-9)) continue;
      best_span = (last - first) * step;
      best = Axis{first * step, last * step, {}, std::max(0, -power + (multiple == 2.5 ? 1 : 0))};
      for (int k = 0; k <= static_cast<int>(last - first); ++k) best.ticks.push_back((first + k) * step);
    }
  }
  return best;
}

Axis axis_of(const Curves& curves, bool horizontal) {
  if (curves.empty()) return nice_axis(0, 1);
  double lo = INFINITY, hi = -INFINITY;
  for (const Curve* curve : {&curves.train, &curves.val}) {
    for (const auto& [step, value] : *curve) {
      const double coordinate = horizontal ? static_cast<double>(step) : value;
      lo = std::min(lo, coordinate);
      hi = std::max(hi, coordinate);
    }
  }
  return nice_axis(lo, hi);
}

// Pixel coordinates with one decimal: sharp enough, and the file stays small.
std::string px(double value) { return number(value, 1); }

using Attributes = std::vector<std::pair<const char*, std::string>>;

// One element: <name a="v"/>, or <name a="v">text</name> with the text escaped.
void element(std::string& svg, const char* name, const Attributes& attributes, const std::string* text = nullptr) {
  svg += std::string("<") + name;
  for (const auto& [attribute, value] : attributes) svg += std::string(" ") + attribute + "=\"" + escaped(value) + "\"";
  svg += text == nullptr ? "/>\n" : ">" + escaped(*text) + "</" + name + ">\n";
}

void text_element(std::string& svg, const Attributes& attributes, const std::string& text) {
  element(svg, "text", attributes, &text);
}

struct Panel {
  double left;  // of the panel in the image
  Axis x, y;

  double x_at(double value) const { return left + kPlotLeft + x.fraction(value) * (kPlotRight - kPlotLeft); }
  double y_at(double value) const { return kPlotBottom - y.fraction(value) * (kPlotBottom - kPlotTop); }
};

void draw_axes(std::string& svg, const Panel& panel, const std::string& name, const std::string& y_title) {
  const double left = panel.left + kPlotLeft, right = panel.left + kPlotRight;
  const double middle = (left + right) / 2, y_middle = (kPlotTop + kPlotBottom) / 2;
  const char* const grid = "#e0e0e0";
  text_element(svg, {{"x", px(middle)}, {"y", px(kPlotTop - 10)}, {"text-anchor", "middle"}, {"font-weight", "bold"}},
               name);
  for (double tick : panel.x.ticks) {
    const std::string x = px(panel.x_at(tick));
    element(svg, "line", {{"x1", x}, {"y1", px(kPlotTop)}, {"x2", x}, {"y2", px(kPlotBottom)}, {"stroke", grid}});
    text_element(svg, {{"x", x}, {"y", px(kPlotBottom + 16)}, {"text-anchor", "middle"}},
                 number(tick, panel.x.decimals));
  }
  for (double tick : panel.y.ticks) {
    const std::string y = px(panel.y_at(tick));
    element(svg, "line", {{"x1", px(left)}, {"y1", y}, {"x2", px(right)}, {"y2", y}, {"stroke", grid}});
    text_element(svg, {{"x", px(left - 6)}, {"y", y}, {"dy", "4"}, {"text-anchor", "end"}},
                 number(tick, panel.y.decimals));
  }
  element(svg, "rect",
          {{"x", px(left)},
           {"y", px(kPlotTop)},
           {"width", px(right - left)},
           {"height", px(kPlotBottom - kPlotTop)},
           {"fill", "none"},
           {"stroke", "#444"}});
  text_element(svg, {{"x", px(middle)}, {"y", px(kPlotBottom + 40)}, {"text-anchor", "middle"}}, "step");
  const std::string title_x = px(panel.left + 20);
  text_element(svg,
               {{"x", title_x},
                {"y", px(y_middle)},
                {"text-anchor", "middle"},
                {"transform", "rotate(-90 " + title_x + " " + px(y_middle) + ")"}},
               y_title);
}

void draw_marker(std::string& svg, double x, double y, const char* color) {
  element(svg, "circle", {{"cx", px(x)}, {"cy", px(y)}, {"r", "3"}, {"fill", color}});
}

// A lone point draws no line, so it gets a marker like every validation point.
void draw_curve(std::string& svg, const Panel& panel, const Curve& curve, const char* color, bool markers) {
  if (curve.empty()) return;
  std::string points;
  for (const auto& [step, value] : curve) {
    points += (points.empty() ? "" : " ") + px(panel.x_at(static_cast<double>(step))) + "," + px(panel.y_at(value));
  }
  element(svg, "polyline", {{"fill", "none"}, {"stroke", color}, {"stroke-width", "1.5"}, {"points", points}});
  if (!markers && curve.size() > 1) return;
  for (const auto& [step, value] : curve) {
    draw_marker(svg, panel.x_at(static_cast<double>(step)), panel.y_at(value), color);
  }
}

void draw_panel(std::string& svg, double left, const std::string& name, const std::string& y_title,
                const Curves& curves) {
  const Panel panel{left, axis_of(curves, true), axis_of(curves, false)};
  draw_axes(svg, panel, name, y_title);
  if (curves.empty()) {
    text_element(svg,
                 {{"x", px(left + (kPlotLeft + kPlotRight) / 2)},
                  {"y", px((kPlotTop + kPlotBottom) / 2)},
                  {"text-anchor", "middle"},
                  {"fill", "#888"}},
                 "no data");
  }
  draw_curve(svg, panel, curves.train, kTrainColor, false);
  draw_curve(svg, panel, curves.val, kValColor, true);
}

void draw_legend(std::string& svg) {
  const double y = 24;
  double x = kWidth - 150;
  const auto entries = {std::tuple{"train", kTrainColor, false}, std::tuple{"val", kValColor, true}};
  for (const auto& [label, color, marked] : entries) {
    element(
        svg, "line",
        {{"x1", px(x)}, {"y1", px(y)}, {"x2", px(x + 24)}, {"y2", px(y)}, {"stroke", color}, {"stroke-width", "1.5"}});
    if (marked) draw_marker(svg, x + 12, y, color);
    text_element(svg, {{"x", px(x + 30)}, {"y", px(y)}, {"dy", "4"}}, label);
    x += 75;
  }
}

}  // namespace

std::string render_curves_svg(const std::vector<Record>& records, const std::string& title) {
  const std::string width = std::to_string(kWidth), height = std::to_string(kHeight);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + width + "\" height=\"" + height +
                    "\" viewBox=\"0 0 " + width + " " + height + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  element(svg, "rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "white"}});
  text_element(svg, {{"x", "20"}, {"y", "28"}, {"font-size", "16"}}, title);
  draw_legend(svg);
  draw_panel(svg, 0, "loss", "loss", curves_of(records, "loss", 1));
  draw_panel(svg, kPanelWidth, "accuracy", "top-1 %", curves_of(records, "top1", 100));
  return svg + "</svg>\n";
}

}  // namespace lockstep::train
