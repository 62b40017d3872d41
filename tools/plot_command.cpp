#include "plot_command.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "lockstep/error.h"
#include "lockstep/train/metrics_sink.h"
#include "timeline/summary.h"
#include "timeline/trace_file.h"

namespace lockstep::tools {
namespace {

// The run directory's own name ("runs/resnet18/" -> "resnet18") titles the plot.
std::string run_name(const std::string& run_dir) {
  const auto path = std::filesystem::absolute(run_dir).lexically_normal();
  const auto name = path.filename().empty() ? path.parent_path().filename() : path.filename();
  return name.string();
}

int plot_run(const std::string& run_dir, std::string out) {
  const std::filesystem::path dir(run_dir);
  const auto records = train::read_json_lines((dir / "metrics.jsonl").string());
  if (out.empty()) out = (dir / "curves.svg").string();
  int train_points = 0, val_points = 0;
  for (const auto& record : records) {
    train_points += record.phase == "train";
    val_points += record.phase == "val";
  }
  std::ofstream file(out);
  file << train::render_curves_svg(records, run_name(run_dir));
  file.close();
  if (!file) throw Error(out + ": cannot write: " + std::strerror(errno));
  std::cout << "wrote " << out << " (" << train_points << " train and " << val_points << " val points)\n";
  // A run recorded with --timeline: its steps split into data wait, compute and exposed communication.
  const std::string timeline_file = (dir / "timeline.json").string();
  if (std::filesystem::exists(timeline_file)) {
    const std::string svg = (std::filesystem::path(out).parent_path() / "timeline.svg").string();
    const auto summary = timeline::detail::summarize(timeline::detail::read_trace(timeline_file), timeline_file);
    std::ofstream timeline_svg(svg);
    timeline_svg << timeline::detail::summary_svg(summary, run_name(run_dir) + ": where each step's time went");
    timeline_svg.close();
    if (!timeline_svg) throw Error(svg + ": cannot write: " + std::strerror(errno));
    std::cout << "wrote " << svg << " (" << summary.ranks.front().steps.size() << " steps)\n";
  }
  return 0;
}

}  // namespace

void add_plot_command(CLI::App& app, Action& chosen) {
  CLI::App* command = app.add_subcommand(
      "plot", "Draw a run's loss and accuracy curves as an SVG file (and its timeline's split of steps, if recorded)");
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  command->add_option("RUN_DIR", *run_dir, "Run directory holding metrics.jsonl")->required();
  command->add_option("--out", *out, "SVG file to write (default: RUN_DIR/curves.svg)");
  command->callback([=, &chosen] { chosen = [=] { return plot_run(*run_dir, *out); }; });
}

}  // namespace lockstep::tools
