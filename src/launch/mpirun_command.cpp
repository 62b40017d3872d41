#include "launch/mpirun_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lockstep/error.h"

namespace lockstep::launch {

std::vector<std::string> mpirun_command(const LaunchOptions& options, bool running_as_root) {
  std::vector<std::string> command = {"mpirun", "-n", std::to_string(options.nproc_per_node)};
  command.push_back("--oversubscribe");  // -n counts workers, not cores: more than the cores is fine
  command.insert(command.end(), {"-x", "LOCKSTEP_BACKEND=mpi"});
  if (running_as_root) {
    command.push_back("--allow-run-as-root");  // OpenMPI refuses root otherwise (containers)
  }
  command.insert(command.end(), options.command.begin(), options.command.end());
  return command;
}

void exec_mpirun(const LaunchOptions& options) {
  std::vector<std::string> command = mpirun_command(options, geteuid() == 0);
  std::vector<char*> argv;
  for (std::string& word : command) {
    argv.push_back(word.data());
  }
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw Error(std::string("cannot run 'mpirun' for --backend mpi: ") + std::strerror(errno) +
              "; install OpenMPI or put mpirun in PATH");
}

}  // namespace lockstep::launch
