#pragma once

#include <sstream>
#include <string>
#include <vector>

// The store keys of live recovery, written by workers (elastic/membership.cpp) and by their
// launchers (a worker's end), defined once here.
namespace lockstep::elastic {

/// One worker as live recovery knows it: its launcher's name for it (the rank it was first
/// given, kept while ranks change) and which start of it this is (0, then 1 for the first
/// replacement its launcher started, ...).
struct Member {
  int id = 0;
  int incarnation = 0;
  bool operator==(const Member& other) const { return id == other.id && incarnation == other.incarnation; }
};

inline std::string elastic_key(int attempt, const std::string& key) {
  return "lockstep/attempt-" + std::to_string(attempt) + "/elastic/" + key;
}

inline std::string member_name(const Member& member) {
  return std::to_string(member.id) + ":" + std::to_string(member.incarnation);
}

/// Set by the member's launcher once the process has ended (waitpid said so), or by another
/// node's launcher once the member's node stopped answering: the evidence that lets the
/// others form a generation without it, never a timeout.
inline std::string ended_key(int attempt, const Member& member) {
  return elastic_key(attempt, "ended/" + member_name(member));
}

/// Counts the ended_key marks set: one store request tells a member whether to look again.
inline std::string ended_count_key(int attempt) { return elastic_key(attempt, "ended/count"); }

/// The latest generation's number, and each generation's members ("0:0 2:1 ...").
inline std::string generation_key(int attempt) { return elastic_key(attempt, "generation"); }
inline std::string members_key(int attempt, int generation) {
  return elastic_key(attempt, "generation-" + std::to_string(generation) + "/members");
}

inline std::vector<Member> parse_members(const std::string& record) {
  std::vector<Member> members;
  std::istringstream in(record);
  std::string name;
  while (in >> name) {
    const auto colon = name.find(':');
    members.push_back({std::stoi(name.substr(0, colon)), std::stoi(name.substr(colon + 1))});
  }
  return members;
}

}  // namespace lockstep::elastic
