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

// Every kind of flag, in two sections.
FlagSet Declare(Options* o) {
  FlagSet flags;
  flags.String("name", &o->name, {"NAME", "what to call it"});
  flags.String("maybe", &o->maybe, {"TEXT", "an optional text"});
  flags.Section("Numbers");
  flags.Number("count", &o->count, {"N", "how many (default 0)"});
  flags.Number("ratio", &o->ratio, {"F", "a share"});
  flags.Number("seed", &o->seed, {"S", "random seed"});
  flags.Section("Switches");
  flags.Switch("on", &o->on, "turn it on");
  flags.Switch("no-off", &o->off, "keep it on", false);
  return flags;
}

std::string Parse(std::vector<const char*> args, Options* o, bool* help) {
  args.insert(args.begin(), "prog");
  return Declare(o).Parse(static_cast<int>(args.size()), args.data(), help);
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
           {{"--cuont", "1"}, "unknown flag --cuont (did you mean --count? see --help)"},
           {{"--o"}, "unknown flag --o (see --help)"},
       }) {
    Options o;
    bool help = false;
    EXPECT_EQ(Parse(c.args, &o, &help), c.message) << c.args[0];
  }
}

TEST(FlagSetHelpTest, ListsEveryFlagWithItsHelpUnderItsSection) {
  Options o;
  EXPECT_EQ(Declare(&o).Help("Usage: prog [options]\n", "Exit codes: 0 or 2.\n"),
            "Usage: prog [options]\n"
            "\n"
            "  --name NAME   what to call it\n"
            "  --maybe TEXT  an optional text\n"
            "Numbers:\n"
            "  --count N     how many (default 0)\n"
            "  --ratio F     a share\n"
            "  --seed S      random seed\n"
            "Switches:\n"
            "  --on          turn it on\n"
            "  --no-off      keep it on\n"
            "  --help        this text\n"
            "Exit codes: 0 or 2.\n");
}

TEST(FlagSetHelpTest, WrapsLongHelpAndMovesLongLabelsToTheirOwnLine) {
  std::string value;
  bool on = false;
  FlagSet flags;
  flags.String("x", &value, {"N", std::string(60, 'a') + " " + std::string(60, 'b')});
  flags.String("a-very-long-flag-name-indeed", &value, {"VALUE", "long label"});
  flags.Switch("table", &on, "presets:\n  tiny   small\n  big    large");
  EXPECT_EQ(flags.Help("Usage: prog\n"),
            "Usage: prog\n"
            "\n"
            "  --x N    " +
                std::string(60, 'a') + "\n" + "           " + std::string(60, 'b') + "\n" +
                "  --a-very-long-flag-name-indeed VALUE\n"
                "           long label\n"
                "  --table  presets:\n"
                "             tiny   small\n"
                "             big    large\n"
                "  --help   this text\n");
}

TEST(FlagSetHelpTest, EveryLineFitsAHundredColumnsAndARedeclaredFlagKeepsItsPlace) {
  std::string value;
  FlagSet flags;
  flags.String("first", &value, {"V", "old"});
  flags.String("second", &value, {"V", std::string(300, 'w').replace(50, 1, " ")});
  flags.String("first", &value, {"V", "new"});
  const std::string help = flags.Help("Usage: prog\n");
  EXPECT_NE(help.find("  --first V   new\n  --second V"), std::string::npos) << help;
  EXPECT_EQ(help.find("old"), std::string::npos);
  size_t start = 0;
  for (size_t end = help.find('\n'); end != std::string::npos; end = help.find('\n', start)) {
    // A single word longer than the line is never split.
    if (help.substr(start, end - start).find(std::string(200, 'w')) == std::string::npos) {
      EXPECT_LE(end - start, 100u) << help.substr(start, end - start);
    }
    start = end + 1;
  }
}

}  // namespace
}  // namespace tandem
