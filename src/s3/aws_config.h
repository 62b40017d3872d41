#pragma once

// The settings the AWS SDKs and CLI read besides credentials, read the same way, so that a
// job finds the bucket an `aws s3 ls` on the same machine finds: the environment first,
// then the profile in ~/.aws/config.

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace lockstep::s3 {

/// Looks a variable up; the process's environment, or a map in tests.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
Environment process_environment();

/// An INI file's sections: [name] -> key -> value. Hand-read, because AWS's files are INI,
/// not TOML (toml++ refuses their unquoted values and "[profile name]" headers). Empty
/// when the file does not exist; ConfigError naming the file and line when a line is
/// neither a section, a key = value, a comment nor blank.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;
IniSections read_ini(const std::string& path);

/// The profile named by AWS_PROFILE, or "default".
std::string profile_name(const Environment& env);
/// AWS_CONFIG_FILE, or ~/.aws/config; AWS_SHARED_CREDENTIALS_FILE, or ~/.aws/credentials.
std::string config_file(const Environment& env);
std::string credentials_file(const Environment& env);

/// Key `key` of the profile in the config file ("[profile NAME]", or "[default]"), if set.
std::optional<std::string> profile_setting(const Environment& env, const std::string& key);

/// The region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1.
std::string region(const Environment& env);

/// The S3 endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, or
/// "" for AWS's own.
std::string endpoint_url(const Environment& env);

}  // namespace lockstep::s3
