// Flags declared once (tools/handed_flags.h): what a command reads is what it hands on to the
// processes it starts, with the values resolved since.
#include <algorithm>

#include <gtest/gtest.h>

#include "handed_flags.h"

namespace lockstep::tools {
namespace {

struct Settings {
  std::string name = "default";
  std::string empty_unless_given;
  int workers = 2;
  uint64_t seed = 0;
  double lr = 0.05;
  bool scale = false;    // an option: --scale true
  bool augment = false;  // a flag: --augment
  int restarts = 0;      // kept by the starting process

  HandedFlags<Settings> flags;

  void add_options(CLI::App& command) {
    auto declare = flags.declaring(command, *this);
    declare.option("--name", &Settings::name, "");
    declare.option("--split", &Settings::empty_unless_given, "");
    declare.option("-n,--workers", &Settings::workers, "");
    declare.option("--seed", &Settings::seed, "");
    declare.option("--lr", &Settings::lr, "");
    declare.option("--scale", &Settings::scale, "");
    declare.flag("--augment", &Settings::augment, "");
    declare.kept("--restarts", &Settings::restarts, "");
  }
};

// `arguments` parsed into fresh settings.
Settings parsed(std::vector<std::string> arguments) {
  Settings settings;
  CLI::App command;
  settings.add_options(command);
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
  command.parse(arguments);
  return settings;
}

TEST(HandedFlags, HandOnEveryValueButTheKeptOnesAndEmptyStrings) {
  const Settings given =
      parsed({"-n", "4", "--lr", "0.1", "--augment", "--restarts", "3", "--seed", "18446744073709551615"});
  EXPECT_EQ(given.flags.arguments(given),
            (std::vector<std::string>{"--name", "default", "--workers", "4", "--seed", "18446744073709551615", "--lr",
                                      "0.10000000000000001", "--scale", "false", "--augment"}));
  const Settings again = parsed(given.flags.arguments(given));
  EXPECT_EQ(again.workers, 4);
  EXPECT_EQ(again.seed, UINT64_MAX);
  EXPECT_EQ(again.lr, 0.1);  // every bit
  EXPECT_TRUE(again.augment);
  EXPECT_EQ(again.restarts, 0);
}

TEST(HandedFlags, ACopyHandsOnItsOwnValuesResolvedAfterParsing) {
  const Settings given = parsed({});
  Settings resolved = given;
  resolved.name = "resolved";
  resolved.empty_unless_given = "test";
  resolved.scale = true;
  const auto arguments = given.flags.arguments(resolved);
  const Settings again = parsed(arguments);
  EXPECT_EQ(again.name, "resolved");
  EXPECT_EQ(again.empty_unless_given, "test");
  EXPECT_TRUE(again.scale);
  EXPECT_FALSE(again.augment);
  EXPECT_EQ(given.flags.arguments(given)[1], "default") << "the original keeps its own";
}

}  // namespace
}  // namespace lockstep::tools
