#include "support/slurm_cluster.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace lockstep::testing {
namespace {

std::string trimmed(const std::string& text) {
  const size_t end = text.find_last_not_of(" \n");
  return end == std::string::npos ? "" : text.substr(0, end + 1);
}

}  // namespace

SlurmCluster::SlurmCluster() {
  const Finished up = run_process({"bash", SLURM_CLUSTER_SCRIPT, "up", folder_.path()}, {}, std::chrono::seconds(60));
  if (up.exit_code != 0) {
    why_not_ = trimmed(up.output);
    if (why_not_.empty())
      why_not_ = "tests/support/slurm_cluster.sh up failed with status " + std::to_string(up.exit_code);
    return;
  }
  for (const std::string& line : lines_of(up.output)) {
    const size_t equals = line.find('=');
    if (equals != std::string::npos) cluster_[line.substr(0, equals)] = line.substr(equals + 1);
  }
}

SlurmCluster::~SlurmCluster() {
  run_process({"bash", SLURM_CLUSTER_SCRIPT, "down", folder_.path()}, {}, std::chrono::seconds(60));
}

std::string SlurmCluster::host(int node) const { return cluster_.at(node == 0 ? "HOST1" : "HOST2"); }

std::string SlurmCluster::address(int node) const { return cluster_.at(node == 0 ? "ADDR1" : "ADDR2"); }

std::vector<std::string> SlurmCluster::on(int node, const std::vector<std::string>& command) const {
  std::vector<std::string> inside = {"ip", "netns", "exec", cluster_.at(node == 0 ? "NETNS1" : "NETNS2")};
  inside.insert(inside.end(), command.begin(), command.end());
  return inside;
}

Finished SlurmCluster::client(const std::vector<std::string>& command, const Env& env) const {
  Env with_conf = env;
  with_conf["SLURM_CONF"] = cluster_.at("SLURM_CONF");
  return run_process(on(0, command), with_conf, std::chrono::seconds(30));
}

std::string SlurmCluster::submit(const std::string& script, const std::vector<std::string>& options,
                                 const Env& env) const {
  static int scripts = 0;
  const std::string file = folder() + "/job-" + std::to_string(++scripts) + ".sh";
  std::ofstream(file) << "#!/bin/bash\n" << script << "\n";
  std::vector<std::string> command = {"sbatch", "--parsable", "--chdir", folder()};
  command.insert(command.end(), options.begin(), options.end());
  command.push_back(file);
  const Finished submitted = client(command, env);
  if (submitted.exit_code != 0) throw std::runtime_error("sbatch failed: " + submitted.output);
  return trimmed(submitted.output);
}

std::map<std::string, std::string> SlurmCluster::job(const std::string& id) const {
  std::map<std::string, std::string> fields;
  std::istringstream words(client({"scontrol", "show", "job", id}).output);
  for (std::string word; words >> word;) {
    const size_t equals = word.find('=');
    if (equals != std::string::npos) fields[word.substr(0, equals)] = word.substr(equals + 1);
  }
  return fields;
}

std::string SlurmCluster::wait_for_state(const std::string& id, const std::vector<std::string>& states,
                                         std::chrono::seconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string state;
  while (std::chrono::steady_clock::now() < deadline) {
    state = job(id)["JobState"];
    for (const auto& wanted : states) {
      if (state == wanted) return state;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return state;
}

std::chrono::seconds SlurmCluster::run_time(const std::string& id) const {
  // [D-]HH:MM:SS, as scontrol prints it.
  const std::string text = job(id)["RunTime"];
  int days = 0, hours = 0, minutes = 0, seconds = 0;
  const bool parsed = text.find('-') == std::string::npos
                          ? std::sscanf(text.c_str(), "%d:%d:%d", &hours, &minutes, &seconds) == 3
                          : std::sscanf(text.c_str(), "%d-%d:%d:%d", &days, &hours, &minutes, &seconds) == 4;
  if (!parsed) throw std::runtime_error("job " + id + " has no RunTime in scontrol's answer: '" + text + "'");
  return std::chrono::seconds(((days * 24 + hours) * 60 + minutes) * 60 + seconds);
}

}  // namespace lockstep::testing
