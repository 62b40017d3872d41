#include "s3/aws_config.h"

#include <cstdlib>
#include <fstream>

#include "lockstep/error.h"

namespace lockstep::s3 {
namespace {

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::string home_file(const Environment& env, const std::string& name) {
  const auto home = env("HOME");
  return (home ? *home : std::string()) + "/.aws/" + name;
}

std::optional<std::string> first_set(const Environment& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = env(name); value && !value->empty()) return value;
  }
  return std::nullopt;
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

IniSections read_ini(const std::string& path) {
  IniSections sections;
  std::ifstream file(path);
  std::string line, section;
  for (int number = 1; std::getline(file, line); ++number) {
    const std::string text = trimmed(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      section = trimmed(text.substr(1, text.size() - 2));
      sections[section];
      continue;
    }
    const size_t equals = text.find('=');
    if (equals == std::string::npos || section.empty()) {
      throw ConfigError(path + ":" + std::to_string(number) +
                        ": expected [section] or key = value; this line is neither");
    }
    sections[section][trimmed(text.substr(0, equals))] = trimmed(text.substr(equals + 1));
  }
  return sections;
}

std::string profile_name(const Environment& env) { return first_set(env, {"AWS_PROFILE"}).value_or("default"); }

std::string config_file(const Environment& env) {
  return first_set(env, {"AWS_CONFIG_FILE"}).value_or(home_file(env, "config"));
}

std::string credentials_file(const Environment& env) {
  return first_set(env, {"AWS_SHARED_CREDENTIALS_FILE"}).value_or(home_file(env, "credentials"));
}

std::optional<std::string> profile_setting(const Environment& env, const std::string& key) {
  const std::string profile = profile_name(env);
  const IniSections config = read_ini(config_file(env));
  for (const std::string& section : {profile == "default" ? profile : "profile " + profile, profile}) {
    const auto found = config.find(section);
    if (found == config.end()) continue;
    if (const auto value = found->second.find(key); value != found->second.end()) return value->second;
  }
  return std::nullopt;
}

std::string region(const Environment& env) {
  if (auto value = first_set(env, {"AWS_REGION", "AWS_DEFAULT_REGION"})) return *value;
  return profile_setting(env, "region").value_or("us-east-1");
}

std::string endpoint_url(const Environment& env) {
  if (auto value = first_set(env, {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"})) return *value;
  return profile_setting(env, "endpoint_url").value_or("");
}

}  // namespace lockstep::s3
