#include "audit_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "lockstep/error.h"
#include "lockstep/train/sample_log.h"

namespace lockstep::tools {
namespace {

int audit(const std::string& run) {
  namespace fs = std::filesystem;
  const std::string path = fs::is_directory(run) ? (fs::path(run) / "samples.log").string() : run;
  if (fs::is_directory(run) && !fs::exists(path)) {
    throw ConfigError(run +
                      " has no samples.log: the run was trained without --sample-log, which keeps the ids of "
                      "every step's samples for this audit");
  }
  const train::SampleLog log = train::read_sample_log(path);
  const train::SampleAudit audit = train::audit_sample_log(log);
  const auto& h = log.header;
  std::cout << path << ": " << log.steps.size() << " steps of a dataset of " << h.dataset_size << " samples, "
            << (h.global_batch_size > 0 ? "global batch " + std::to_string(h.global_batch_size) : "a batch per worker")
            << ", seed " << h.seed << "\n";
  if (log.cut_last_line) std::cout << "its last line was cut (the run stopped while writing it) and is left out\n";
  for (const auto& line : audit.lines) std::cout << line << "\n";
  return audit.every_sample_once ? 0 : 1;
}

}  // namespace

void add_audit_command(CLI::App& data, Action& chosen) {
  CLI::App* command = data.add_subcommand(
      "audit", "Say whether a run trained every sample once per epoch, from its sample log (train --sample-log)");
  auto run = std::make_shared<std::string>();
  command->add_option("RUN", *run, "Run folder (its samples.log), or a sample log")->required();
  command->callback([=, &chosen] { chosen = [=] { return audit(*run); }; });
}

}  // namespace lockstep::tools
