// The SVG curves and `lockstep plot`.
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/train/metrics_sink.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

using train::Record;

// Training loss falling from 2.3 to 0.4 and accuracy rising from 10% to 90% over 1000 steps,
// validated at steps 500 and 1000.
std::vector<Record> a_run() {
  std::vector<Record> records;
  for (int step = 100; step <= 1000; step += 100) {
    const double progress = (step - 100) / 900.0;
    records.push_back({"train",
                       step <= 500 ? 1 : 2,
                       2,
                       step,
                       1000,
                       step * 0.1,
                       {{"loss", 2.3 - 1.9 * progress}, {"top1", 0.1 + 0.8 * progress}}});
    if (step % 500 == 0) {
      const double loss = 2.0 - step / 1000.0;
      records.push_back({"val", step / 500, 2, step, 1000, step * 0.1 + 1, {{"loss", loss}, {"top1", 0.5}}});
    }
  }
  return records;
}

size_t count(const std::string& text, const std::string& part) {
  size_t found = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
  return found;
}

// Text of every element with this text-anchor, in document order.
std::vector<std::string> labels(const std::string& svg, const std::string& anchor) {
  std::vector<std::string> texts;
  const std::regex label("text-anchor=\"" + anchor + "\"[^>]*>([^<]*)</text>");
  for (std::sregex_iterator match(svg.begin(), svg.end(), label), end; match != end; ++match) {
    texts.push_back((*match)[1]);
  }
  return texts;
}

TEST(Plot, TwoPanelsWithTrainAndValCurvesAxesAndLegend) {
  const std::string svg = train::render_curves_svg(a_run(), "resnet18 on fashion-mnist");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<polyline"), 4u);    // train and val, in each panel
  EXPECT_EQ(count(svg, "<circle"), 4u + 1);  // two val points per panel, one in the legend
  EXPECT_TRUE(contains(svg, ">resnet18 on fashion-mnist</text>"));
  EXPECT_EQ(count(svg, ">step</text>"), 2u);
  EXPECT_TRUE(contains(svg, ">loss</text>"));
  EXPECT_TRUE(contains(svg, ">accuracy</text>"));
  EXPECT_TRUE(contains(svg, ">top-1 %</text>"));
  EXPECT_TRUE(contains(svg, ">train</text>"));
  EXPECT_TRUE(contains(svg, ">val</text>"));
}

TEST(Plot, TickLabelsAreRoundNumbers) {
  const std::string svg = train::render_curves_svg(a_run(), "run");
  // y ticks: loss 0.4..2.3, then top-1 10..90 %; the tightest round axes with 3-5 intervals
  EXPECT_EQ(labels(svg, "end"),
            (std::vector<std::string>{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "0", "25", "50", "75", "100"}));
  const std::vector<std::string> step_ticks = {"0", "250", "500", "750", "1000"};
  std::vector<std::string> x_ticks;
  for (const auto& text : labels(svg, "middle")) {
    if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) x_ticks.push_back(text);
  }
  std::vector<std::string> both = step_ticks;
  both.insert(both.end(), step_ticks.begin(), step_ticks.end());
  EXPECT_EQ(x_ticks, both);

  std::vector<Record> small;
  for (int step = 1; step <= 3; ++step) small.push_back({"train", 1, 1, step, 3, 0, {{"loss", 0.031 + 0.002 * step}}});
  EXPECT_EQ(labels(train::render_curves_svg(small, "run"), "end"),
            (std::vector<std::string>{"0.033", "0.034", "0.035", "0.036", "0.037",  // loss
                                      "0.00", "0.25", "0.50", "0.75", "1.00"}));    // no data: 0..1
}

TEST(Plot, SinglePointsMissingValuesAndNanAreDrawnOrSkipped) {
  const std::vector<Record> records = {
      {"train", 1, 1, 7, 7, 1, {{"loss", 0.5}, {"top1", std::nan("")}}},
      {"train", 1, 1, 8, 8, 1, {{"samples_per_second", 100}}},
      {"val", 1, 1, 8, 8, 2, {{"loss", INFINITY}}},
  };
  const std::string svg = train::render_curves_svg(records, "one point");
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(count(svg, "<circle"), 1u + 1);       // the lone train point, and the legend's
  EXPECT_TRUE(contains(svg, ">no data</text>"));  // no accuracy at all
  EXPECT_FALSE(contains(svg, "nan"));
  EXPECT_FALSE(contains(svg, "inf"));

  const std::string empty = train::render_curves_svg({}, "nothing yet");
  EXPECT_EQ(count(empty, ">no data</text>"), 2u);
  EXPECT_EQ(count(empty, "<polyline"), 0u);
}

TEST(Plot, TextIsEscapedForXml) {
  const std::string svg = train::render_curves_svg(a_run(), "lr<0.1 & \"warm\" 'up'");
  EXPECT_TRUE(contains(svg, ">lr&lt;0.1 &amp; &quot;warm&quot; &apos;up&apos;</text>")) << svg;
  EXPECT_FALSE(contains(svg, "lr<0.1"));
}

TEST(Plot, CommandWritesCurvesBesideTheMetrics) {
  TemporaryDirectory run;
  {
    auto sink = train::json_lines_sink(run.path() + "/metrics.jsonl");
    for (const auto& record : a_run()) sink->write(record);
  }
  const auto plotted = run_process({LOCKSTEP_TOOL, "plot", run.path()});
  ASSERT_EQ(plotted.exit_code, 0) << plotted.output;
  EXPECT_EQ(plotted.output, "wrote " + run.path() + "/curves.svg (10 train and 2 val points)\n");
  const std::string svg = read_file(run.path() + "/curves.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "<polyline"), 4u);
  EXPECT_TRUE(contains(svg, ">" + std::filesystem::path(run.path()).filename().string() + "</text>"));  // titled by run

  const std::string elsewhere = run.path() + "/plots.svg";
  const auto to_file = run_process({LOCKSTEP_TOOL, "plot", run.path() + "/", "--out", elsewhere});
  ASSERT_EQ(to_file.exit_code, 0) << to_file.output;
  EXPECT_TRUE(contains(to_file.output, "wrote " + elsewhere + " (10 train and 2 val points)")) << to_file.output;
  EXPECT_EQ(read_file(elsewhere), svg);
}

TEST(Plot, CommandWithoutMetricsEndsWithOneLineNamingTheFile) {
  TemporaryDirectory run;
  const auto plotted = run_process({LOCKSTEP_TOOL, "plot", run.path()});
  EXPECT_EQ(plotted.exit_code, 1) << plotted.output;
  EXPECT_EQ(plotted.output, "lockstep plot: " + run.path() + "/metrics.jsonl: no such file\n");
  EXPECT_FALSE(std::filesystem::exists(run.path() + "/curves.svg"));
}

}  // namespace
}  // namespace lockstep::testing
