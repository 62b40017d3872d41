#include "export_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <torch/script.h>

#include "lockstep/error.h"
#include "lockstep/ddp/scripted_module.h"
#include "lockstep/train/checkpoint.h"
#include "torch_save_format.h"
#include "train_job.h"

namespace lockstep::tools {
namespace {

namespace fs = std::filesystem;

struct ExportRequest {
  std::string run_dir;
  std::string out;
  std::string checkpoint;   // default: the run's newest
  bool state_dict = false;  // a state dict even for a TorchScript run
};

std::string newest_checkpoint(const std::string& run_dir) {
  const std::string folder = (fs::path(run_dir) / "checkpoints").string();
  const std::string newest = train::CheckpointFolder(folder, 1).latest();
  if (newest.empty())
    throw ConfigError(run_dir + " has no checkpoints in " + folder + "; is it a lockstep train run folder?");
  return newest;
}

// Written beside the destination and renamed over it, so that a failed export leaves no
// half-written file and keeps an earlier one.
template <typename Write>
void write_atomically(const std::string& out, Write write) {
  const std::string temporary = out + ".tmp";
  std::error_code failure;
  try {
    write(temporary);
  } catch (const c10::Error& error) {
    fs::remove(temporary, failure);
    throw Error("cannot write " + out + ": " + error.what_without_backtrace());
  } catch (...) {
    fs::remove(temporary, failure);
    throw;
  }
  fs::rename(temporary, out, failure);
  if (failure) throw Error("cannot write " + out + ": " + failure.message());
}

// Python's state_dict() layout: a dict of names to tensors, in torch.save's format.
void export_state_dict(const std::string& checkpoint, const std::string& out) {
  const auto weights = train::load_state_dict(checkpoint);
  write_atomically(out, [&](const std::string& path) { save_for_torch_load(weights, path); });
}

void export_scripted(const std::string& scripted_file, const std::string& checkpoint, const std::string& out) {
  ScriptedModule model = load_scripted_module(scripted_file);
  train::load_model_weights(checkpoint, *model);
  write_atomically(out, [&](const std::string& path) { model->script().save(path); });
}

int export_run(const ExportRequest& request) {
  if (!fs::is_directory(request.run_dir)) throw ConfigError(request.run_dir + ": no such run folder");
  const std::string checkpoint = request.checkpoint.empty() ? newest_checkpoint(request.run_dir) : request.checkpoint;
  const std::string scripted_file = (fs::path(request.run_dir) / kScriptedModelFile).string();
  const bool scripted = fs::exists(scripted_file) && !request.state_dict;
  if (scripted) {
    export_scripted(scripted_file, checkpoint, request.out);
  } else {
    export_state_dict(checkpoint, request.out);
  }
  std::cout << "wrote " << request.out << ": " << (scripted ? "the TorchScript module" : "the state dict") << " of "
            << checkpoint << " (Python: " << (scripted ? "torch.jit.load" : "torch.load") << ")\n";
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, Action& chosen) {
  CLI::App* command = app.add_subcommand("export", "Write a run's trained weights for Python's torch.load");
  auto request = std::make_shared<ExportRequest>();
  command->add_option("RUN_DIR", request->run_dir, "Run folder of lockstep train")->required();
  command->add_option("--out", request->out, "File to write")->required();
  command->add_option("--checkpoint", request->checkpoint, "Checkpoint to export (default: the run's newest)");
  command->add_flag("--state-dict", request->state_dict,
                    "Write a state dict even for a TorchScript model (default: the scripted module)");
  command->callback([request, &chosen] { chosen = [request] { return export_run(*request); }; });
}

}  // namespace lockstep::tools
