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
  return 0;
}

}  // namespace

void add_plot_command(CLI::App& app, Action& chosen) {
  CLI::App* command = app.add_subcommand("plot", "Draw a run's loss and accuracy curves as an SVG file");
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  command->add_option("RUN_DIR", *run_dir, "Run directory holding metrics.jsonl")->required();
  command->add_option("--out", *out, "SVG file to write (default: RUN_DIR/curves.svg)");
  command->callback([=, &chosen] { chosen = [=] { return plot_run(*run_dir, *out); }; });
}

}  // namespace lockstep::tools
