#include "job/slurm_step.h"

#include <cctype>
#include <numeric>

#include "lockstep/error.h"

namespace lockstep {
namespace {

// A list this long is a typo (n[1-100000000]), not a cluster: refuse it before it fills memory.
constexpr size_t kMostNodes = 1 << 20;

ConfigError unreadable(const std::string& variable, const std::string& value, const std::string& why) {
  return ConfigError("lockstep: " + variable + "='" + value + "' " + why);
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// Splits at the commas that are not inside brackets.
std::vector<std::string> split_outside_brackets(const std::string& text) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

struct ListReader {
  const std::string& list;
  const std::string& variable;

  ConfigError error(const std::string& why) const {
    return unreadable(variable, list, "is not a Slurm node list: " + why);
  }

  // `n[01-03]x[1-2]`: every bracket multiplies the names, leftmost slowest, as Slurm does.
  void expand(const std::string& name, std::vector<std::string>& into) const {
    const size_t open = name.find('[');
    if (open == std::string::npos) {
      if (name.empty()) throw error("an empty node name");
      if (name.find(']') != std::string::npos) throw error("a ']' without its '['");
      into.push_back(name);
      return;
    }
    const size_t close = name.find(']', open);
    if (close == std::string::npos) throw error("a '[' without its ']'");
    const std::string prefix = name.substr(0, open);
    const std::string rest = name.substr(close + 1);
    for (const std::string& range : split_outside_brackets(name.substr(open + 1, close - open - 1))) {
      const size_t dash = range.find('-');
      const std::string low = range.substr(0, dash);
      const std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
      if (!all_digits(low) || !all_digits(high) || low.size() > 9 || high.size() > 9) {
        throw error("'" + range + "' is not a number or a range of numbers like 01-03");
      }
      const long first = std::stol(low), last = std::stol(high);
      if (last < first) throw error("the range " + range + " runs backwards");
      for (long number = first; number <= last; ++number) {
        std::string digits = std::to_string(number);
        if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');  // n[08-10]: n08
        expand(prefix + digits + rest, into);
        if (into.size() > kMostNodes) throw error("more than " + std::to_string(kMostNodes) + " nodes");
      }
    }
  }
};

int read_int(const EnvLookup& env, const std::string& variable) {
  const auto text = env(variable);
  if (!text)
    throw ConfigError("lockstep: " + variable + " is not set, but srun sets it for every task (SLURM_STEP_ID is set)");
  if (!all_digits(*text) || text->size() > 9) throw unreadable(variable, *text, "is not a number");
  return std::stoi(*text);
}

}  // namespace

std::vector<std::string> expand_node_list(const std::string& list, const std::string& variable) {
  const ListReader reader{list, variable};
  std::vector<std::string> nodes;
  for (const std::string& item : split_outside_brackets(list)) reader.expand(item, nodes);
  return nodes;
}

std::vector<int> expand_tasks_per_node(const std::string& counts, const std::string& variable) {
  std::vector<int> tasks;
  for (const std::string& item : split_outside_brackets(counts)) {
    const size_t open = item.find("(x");
    const std::string count = item.substr(0, open);
    std::string times = "1";
    if (open != std::string::npos) {
      if (item.back() != ')') throw unreadable(variable, counts, "is not a Slurm task count like 2(x3),1");
      times = item.substr(open + 2, item.size() - open - 3);
    }
    if (!all_digits(count) || !all_digits(times) || count.size() > 6 || times.size() > 6) {
      throw unreadable(variable, counts, "is not a Slurm task count like 2(x3),1");
    }
    tasks.insert(tasks.end(), std::stoul(times), std::stoi(count));
    if (tasks.size() > kMostNodes) throw unreadable(variable, counts, "counts tasks on more than a million nodes");
  }
  return tasks;
}

int slurm_step_port(long job_id, long step_id) { return static_cast<int>(15000 + (job_id % 1000) * 16 + step_id % 16); }

namespace {

// Where a step's layout was read from, for messages that name the variables to fix.
struct LayoutSources {
  std::string nodes_variable;
  std::string tasks_variable;
};

// The step's nodes and tasks per node, from the most specific variables srun sets; ConfigError
// where they count different nodes.
LayoutSources read_layout(const EnvLookup& env, SlurmStep& step) {
  LayoutSources from{"SLURM_STEP_NODELIST", ""};
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (env(name)) {
      from.nodes_variable = name;
      break;
    }
  }
  step.nodes = expand_node_list(env(from.nodes_variable).value_or(""), from.nodes_variable);
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (env(name)) {
      from.tasks_variable = name;
      step.tasks_per_node = expand_tasks_per_node(*env(name), name);
      break;
    }
  }
  if (from.tasks_variable.empty()) {  // only the per-node request: the same count on every node
    from.tasks_variable = "SLURM_NTASKS_PER_NODE";
    step.tasks_per_node.assign(step.nodes.size(), read_int(env, from.tasks_variable));
  }
  if (step.tasks_per_node.size() != step.nodes.size()) {
    throw ConfigError("lockstep: " + from.tasks_variable + "='" + env(from.tasks_variable).value_or("") +
                      "' counts tasks on " + std::to_string(step.tasks_per_node.size()) + " nodes, but " +
                      from.nodes_variable + "='" + *env(from.nodes_variable) + "' names " +
                      std::to_string(step.nodes.size()));
  }
  return from;
}

// ConfigError naming the variables that disagree, where srun would never have set them so.
void check_consistent(const EnvLookup& env, const SlurmStep& step, const LayoutSources& from) {
  const std::string& nodes_variable = from.nodes_variable;
  const std::string& tasks_variable = from.tasks_variable;
  const std::string tasks_value = env(tasks_variable).value_or("");
  if (step.node_rank >= static_cast<int>(step.nodes.size())) {
    throw ConfigError("lockstep: SLURM_NODEID=" + std::to_string(step.node_rank) + " is not a node of " +
                      nodes_variable + "='" + *env(nodes_variable) + "' (" + std::to_string(step.nodes.size()) +
                      " nodes)");
  }
  const int step_tasks = std::accumulate(step.tasks_per_node.begin(), step.tasks_per_node.end(), 0);
  if (step.world_size != step_tasks) {
    throw ConfigError("lockstep: SLURM_NTASKS=" + std::to_string(step.world_size) + ", but " + tasks_variable + "='" +
                      tasks_value + "' starts " + std::to_string(step_tasks) +
                      " tasks; srun sets both, so unset the one set by hand");
  }
  if (auto step_total = env("SLURM_STEP_NUM_TASKS");
      step_total && read_int(env, "SLURM_STEP_NUM_TASKS") != step_tasks) {
    throw ConfigError("lockstep: SLURM_STEP_NUM_TASKS=" + *step_total + ", but " + tasks_variable + "='" + tasks_value +
                      "' starts " + std::to_string(step_tasks) +
                      " tasks; srun sets both, so unset the one set by hand");
  }
  if (step.local_rank >= step.local_world_size()) {
    throw ConfigError("lockstep: SLURM_LOCALID=" + std::to_string(step.local_rank) + " is not a task of node " +
                      std::to_string(step.node_rank) + ", which runs " + std::to_string(step.local_world_size()) +
                      " (" + tasks_variable + "='" + tasks_value + "')");
  }
  if (step.rank >= step.world_size) {
    throw ConfigError("lockstep: SLURM_PROCID=" + std::to_string(step.rank) +
                      " is out of range for SLURM_NTASKS=" + std::to_string(step.world_size));
  }
}

}  // namespace

std::optional<SlurmStep> slurm_step(const EnvLookup& env) {
  if (!env("SLURM_STEP_ID") || !env("SLURM_PROCID")) return std::nullopt;
  SlurmStep step;
  step.job_id = env("SLURM_JOB_ID").value_or("");
  if (!all_digits(step.job_id) || step.job_id.size() > 12) {
    throw unreadable("SLURM_JOB_ID", step.job_id, "is not a Slurm job id, which srun sets for every task");
  }
  step.step_id = read_int(env, "SLURM_STEP_ID");
  const LayoutSources from = read_layout(env, step);
  step.node_rank = read_int(env, "SLURM_NODEID");
  step.local_rank = read_int(env, "SLURM_LOCALID");
  step.rank = read_int(env, "SLURM_PROCID");
  step.world_size = read_int(env, "SLURM_NTASKS");
  if (auto restarts = env("SLURM_RESTART_COUNT")) step.restart_count = read_int(env, "SLURM_RESTART_COUNT");
  check_consistent(env, step, from);
  return step;
}

}  // namespace lockstep
