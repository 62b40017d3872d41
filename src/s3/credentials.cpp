#include "s3/credentials.h"

#include <ctime>
#include <iomanip>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lockstep/error.h"
#include "net/http_client.h"

namespace lockstep::s3 {
namespace {

using SystemClock = std::chrono::system_clock;

// How long before expiry container credentials are fetched again.
constexpr std::chrono::minutes kRefreshAhead{5};

std::optional<std::string> set(const Environment& env, const char* name) {
  auto value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::optional<Credentials> from_environment(const Environment& env) {
  const auto key = set(env, "AWS_ACCESS_KEY_ID");
  const auto secret = set(env, "AWS_SECRET_ACCESS_KEY");
  if (!key && !secret) return std::nullopt;
  if (!key || !secret) {
    throw ConfigError(std::string("S3 credentials: ") + (key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                      " is set but " + (key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") + " is not");
  }
  return Credentials{*key, *secret, set(env, "AWS_SESSION_TOKEN").value_or(""), "the environment (AWS_ACCESS_KEY_ID)",
                     std::nullopt};
}

// The profile's keys in `file`, whose sections are named `section`.
std::optional<Credentials> from_file(const std::string& file, const std::string& section, const std::string& profile) {
  const IniSections sections = read_ini(file);
  const auto found = sections.find(section);
  if (found == sections.end()) return std::nullopt;
  const auto& keys = found->second;
  const auto value = [&](const char* key) {
    const auto it = keys.find(key);
    return it == keys.end() ? std::string() : it->second;
  };
  if (value("aws_access_key_id").empty()) return std::nullopt;
  const std::string source = "profile '" + profile + "' in " + file;
  if (value("aws_secret_access_key").empty()) {
    throw ConfigError("S3 credentials: " + source + " has aws_access_key_id but no aws_secret_access_key");
  }
  return Credentials{value("aws_access_key_id"), value("aws_secret_access_key"), value("aws_session_token"), source,
                     std::nullopt};
}

std::optional<Credentials> from_profile(const Environment& env) {
  const std::string profile = profile_name(env);
  if (auto found = from_file(credentials_file(env), profile, profile)) return found;
  return from_file(config_file(env), profile == "default" ? profile : "profile " + profile, profile);
}

bool container_endpoint_set(const Environment& env) {
  return set(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI") || set(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
}

// "2026-11-26T15:00:00Z" as a time point.
SystemClock::time_point parse_expiration(const std::string& text) {
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail())
    throw ConfigError("S3 credentials from the container endpoint: Expiration '" + text + "' is not a time");
  return SystemClock::from_time_t(timegm(&tm));
}

}  // namespace

CredentialChain::CredentialChain(Environment env) : env_(std::move(env)) {
  if (auto found = from_environment(env_)) {
    current_ = *found;
  } else if (auto profile = from_profile(env_)) {
    current_ = *profile;
  } else if (container_endpoint_set(env_)) {
    from_container_ = true;
    current_ = from_container();
  } else if (set(env_, "AWS_PROFILE")) {
    throw ConfigError("S3 credentials: profile '" + profile_name(env_) + "' (AWS_PROFILE) has no keys in " +
                      credentials_file(env_) + " or " + config_file(env_));
  } else {
    throw ConfigError("S3 credentials: none found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in " +
                      credentials_file(env_) +
                      " (AWS_PROFILE picks one), or run where a container credentials "
                      "endpoint is set (AWS_CONTAINER_CREDENTIALS_FULL_URI)");
  }
}

Credentials CredentialChain::get() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (from_container_ && current_.expires && SystemClock::now() + kRefreshAhead >= *current_.expires) {
    current_ = from_container();
  }
  return current_;
}

Credentials CredentialChain::from_container() const {
  std::string url = set(env_, "AWS_CONTAINER_CREDENTIALS_FULL_URI").value_or("");
  if (url.empty()) url = "http://169.254.170.2" + env_("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").value_or("");
  net::HttpRequest request;
  std::string token = set(env_, "AWS_CONTAINER_AUTHORIZATION_TOKEN").value_or("");
  if (const auto token_file = set(env_, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
    std::ifstream file(*token_file);
    std::getline(file, token);
  }
  if (!token.empty()) request.headers.push_back("Authorization: " + token);
  const std::string shown = "the container credentials endpoint " + url;
  net::HttpClient client(net::HttpOptions{"", 5, 1});
  const net::HttpResponse response = client.perform(url, request, shown);
  if (response.status != 200) {
    throw ConfigError("S3 credentials: " + shown + " answered HTTP " + std::to_string(response.status));
  }
  try {
    const auto json = nlohmann::json::parse(response.body.begin(), response.body.end());
    Credentials found{json.at("AccessKeyId").get<std::string>(), json.at("SecretAccessKey").get<std::string>(),
                      json.value("Token", std::string()), shown, std::nullopt};
    if (json.contains("Expiration")) found.expires = parse_expiration(json.at("Expiration").get<std::string>());
    return found;
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("S3 credentials: " + shown + " did not answer with AccessKeyId and SecretAccessKey in JSON");
  }
}

}  // namespace lockstep::s3
