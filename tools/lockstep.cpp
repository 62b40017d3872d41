// The `lockstep` command. Each subcommand registers its options and, when chosen, the action
// main runs; main itself only parses and turns errors into one line and an exit status.
#include <CLI/CLI.hpp>
#include <c10/util/signal_handler.h>
#include <torch/version.h>

#include <csignal>
#include <iostream>
#include <string>

#include "data_commands.h"
#include "eval_command.h"
#include "export_command.h"
#include "lockstep/error.h"
#include "plot_command.h"
#include "run_command.h"
#include "timeline_command.h"
#include "train_command.h"

namespace {

using lockstep::tools::Action;

// What a problem report needs first: this lockstep, the libtorch it was built against, and
// whether it moves CUDA tensors (tools/CMakeLists.txt names the build's device support).
constexpr const char* kVersion =
    "lockstep " LOCKSTEP_VERSION " (libtorch " TORCH_VERSION ", " LOCKSTEP_DEVICE_SUPPORT ")";

// Exit status for input that cannot work as given, as getopt-style tools use.
constexpr int kUsageStatus = 2;

// The library starts its messages with "lockstep: "; the command names itself instead.
std::string without_library_prefix(const std::string& message) {
  const std::string prefix = "lockstep: ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

// "lockstep train": the command as far as it was parsed, to name in errors.
std::string command_name(const CLI::App& app) {
  std::string command = "lockstep";
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty(); sub = sub->get_subcommands().front()) {
    command += " " + sub->get_subcommands().front()->get_name();
  }
  return command;
}

}  // namespace

int main(int argc, char** argv) {
#if defined(C10_SUPPORTS_FATAL_SIGNAL_HANDLERS)
  // A worker that crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE) prints every thread's stack
  // before it dies as it would have: the launcher's "killed by signal 11" alone names no code.
  c10::FatalSignalHandler::getInstance().setPrintStackTracesOnFatalSignal(true);
  std::signal(SIGINT, SIG_DFL);  // c10 takes Ctrl-C for a crash too; an interrupt prints no stacks
#endif
  CLI::App app{"lockstep: data-parallel training for libtorch"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", kVersion);
  Action chosen;
  lockstep::tools::add_run_command(app, chosen);
  lockstep::tools::add_datasets_command(app, chosen);
  lockstep::tools::add_data_command(app, chosen);
  lockstep::tools::add_train_command(app, chosen);
  lockstep::tools::add_eval_command(app, chosen);
  lockstep::tools::add_plot_command(app, chosen);
  lockstep::tools::add_export_command(app, chosen);
  lockstep::tools::add_timeline_command(app, chosen);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& help_or_version) {
    return app.exit(help_or_version);
  } catch (const CLI::ParseError& error) {
    const std::string command = command_name(app);
    // Only `run` takes a program, whose own arguments CLI11 would take for lockstep's.
    const bool program_misplaced = command == "lockstep run" && dynamic_cast<const CLI::ExtrasError*>(&error);
    std::cerr << command << ": " << error.what()
              << (program_misplaced ? " (put PROGRAM and its ARGS after --)" : " (see " + command + " --help)") << "\n";
    return kUsageStatus;
  } catch (const lockstep::ConfigError& error) {  // from a subcommand's settings
    std::cerr << command_name(app) << ": " << without_library_prefix(error.what()) << "\n";
    return kUsageStatus;
  }
  if (app.get_subcommands().empty()) {
    std::cout << app.help();
    return 0;
  }

  const std::string command = command_name(app);
  try {
    return chosen();
  } catch (const lockstep::ConfigError& error) {
    std::cerr << command << ": " << without_library_prefix(error.what()) << "\n";
    return kUsageStatus;
  } catch (const lockstep::Error& error) {
    std::cerr << command << ": " << without_library_prefix(error.what()) << "\n";
    return 1;
  }
}
