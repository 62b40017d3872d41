#include "timeline_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/error.h"
#include "lockstep/timeline.h"
#include "timeline/summary.h"
#include "timeline/trace_file.h"

namespace lockstep::tools {
namespace {

int summarize_file(const std::string& file, bool json, const std::string& svg) {
  const auto summary = timeline::detail::summarize(timeline::detail::read_trace(file), file);
  if (json) {
    std::cout << timeline::detail::summary_json(summary).dump(2) << "\n";
  } else {
    std::cout << timeline::detail::summary_table(summary);
  }
  if (!svg.empty()) {
    std::ofstream out(svg);
    out << timeline::detail::summary_svg(summary, file);
    out.close();
    if (!out) throw Error(svg + ": cannot write: " + std::strerror(errno));
  }
  return 0;
}

}  // namespace

void add_timeline_command(CLI::App& app, Action& chosen) {
  CLI::App* command =
      app.add_subcommand("timeline", "Merge and summarize timelines (LOCKSTEP_TIMELINE, lockstep train --timeline)");
  command->require_subcommand(1);

  CLI::App* merge = command->add_subcommand("merge", "Merge the ranks' timeline files into one trace");
  auto out = std::make_shared<std::string>();
  auto files = std::make_shared<std::vector<std::string>>();
  merge->add_option("OUT", *out, "The merged trace to write")->required();
  merge->add_option("FILE", *files, "Per-rank timelines (PREFIX.rank-R.json)")->required();
  merge->callback([=, &chosen] {
    chosen = [=] {
      timeline::merge(*files, *out);
      std::cout << "wrote " << *out << " (" << files->size() << " files merged)\n";
      return 0;
    };
  });

  CLI::App* summary = command->add_subcommand(
      "summary", "Per step, data wait / compute / exposed communication and overlap; and which rank arrived last");
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto svg = std::make_shared<std::string>();
  summary->add_option("FILE", *file, "A merged timeline (a run's timeline.json)")->required();
  summary->add_flag("--json", *json, "JSON for scripts instead of tables");
  summary->add_option("--svg", *svg, "Also draw the per-step split as an SVG file");
  summary->callback([=, &chosen] { chosen = [=] { return summarize_file(*file, *json, *svg); }; });
}

}  // namespace lockstep::tools
