#include "common/util/cli_flags.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

struct Options {
  std::string name;
  std::optional<std::string> maybe;
  int count = 0;
  float ratio = 0;
  std::optional<uint64_t> seed;
  bool on = false;
  bool off = true;
};

std::string Parse(std::vector<const char*> args, Options* o, bool* help) {
  args.insert(args.begin(), "prog");
  FlagSet flags;
  flags.String("name", &o->name);
  flags.String("maybe", &o->maybe);
  flags.Number("count", &o->count);
  flags.Number("ratio", &o->ratio);
  flags.Number("seed", &o->seed);
  flags.Switch("on", &o->on);
  flags.Switch("no-off", &o->off, false);
  return flags.Parse(static_cast<int>(args.size()), args.data(), help);
}

TEST(FlagSetTest, FillsEveryKindOfFlag) {
  Options o;
  bool help = false;
  EXPECT_EQ(Parse({"--name", "x", "--maybe=y", "--count", "-3", "--ratio=0.25", "--seed", "42",
                   "--on", "--no-off"},
                  &o, &help),
            "");
  EXPECT_FALSE(help);
  EXPECT_EQ(o.name, "x");
  EXPECT_EQ(o.maybe, "y");
  EXPECT_EQ(o.count, -3);
  EXPECT_FLOAT_EQ(o.ratio, 0.25f);
  EXPECT_EQ(o.seed, 42u);
  EXPECT_TRUE(o.on);
  EXPECT_FALSE(o.off);
}

TEST(FlagSetTest, HelpStopsParsing) {
  Options o;
  bool help = false;
  EXPECT_EQ(Parse({"--help", "--bogus"}, &o, &help), "");
  EXPECT_TRUE(help);
}

TEST(FlagSetTest, ReportsTheFirstProblemNamingTheFlag) {
  struct Case {
    std::vector<const char*> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--bogus", "1"}, "unknown flag --bogus (see --help)"},
           {{"stray"}, "unexpected argument 'stray'"},
           {{"--"}, "unexpected argument '--'"},
           {{"--name"}, "--name needs a value"},
           {{"--count", "3x"}, "--count expects an integer, got '3x'"},
           {{"--count", "99999999999"}, "--count expects an integer, got '99999999999'"},
           {{"--ratio", "fast"}, "--ratio expects a number, got 'fast'"},
           {{"--ratio", "inf"}, "--ratio expects a number, got 'inf'"},
           {{"--seed", "-1"}, "--seed expects a non-negative integer, got '-1'"},
           {{"--on=1"}, "--on takes no value"},
       }) {
    Options o;
    bool help = false;
    EXPECT_EQ(Parse(c.args, &o, &help), c.message) << c.args[0];
  }
}

}  // namespace
}  // namespace tandem
