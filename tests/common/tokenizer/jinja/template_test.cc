// Jinja features one by one. Expected outputs are Python jinja2's (Hugging Face's chat-template
// environment); tests/conformance/tokenizer/jinja_differential.py re-checks them against jinja2.
#include "common/tokenizer/jinja/template.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::string> TryRender(const std::string& source,
                                      const std::string& context_json = "{}") {
  auto t = Template::Parse(source);
  if (!t.ok()) return t.status();
  ValueDict globals;
  const nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_json);
  for (const auto& [k, v] : context.items()) {
    globals.Set(k, Value::FromJson(v));
  }
  return t->Render(globals);
}

std::string Render(const std::string& source, const std::string& context_json = "{}") {
  auto out = TryRender(source, context_json);
  EXPECT_TRUE(out.ok()) << out.status() << "\n  template: " << source;
  return out.ok() ? *out : "<error>";
}

constexpr char kMessages[] = R"({"messages": [{"role": "system", "content": "  Be nice. "},
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!"}]})";

TEST(TemplateTest, LiteralsAndArithmetic) {
  EXPECT_EQ(Render("{{ 1 }} {{ 1.5 }} {{ 2.0 }} {{ -3 }} {{ 1e3 }} {{ 10 / 4 }} {{ 10 // 4 }} "
                   "{{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}"),
            "1 1.5 2.0 -3 1000.0 2.5 2 -4 2 1024");
  EXPECT_EQ(Render("{{ true }} {{ none }} {{ undefined_thing }}|"), "True None |");
  EXPECT_EQ(Render("{{ [1, 'a', none, true] }} {{ {'k': 'v'} }} {{ (1, 2) }}"),
            "[1, 'a', None, True] {'k': 'v'} (1, 2)");
  EXPECT_EQ(Render("{{ 'a' + 'b' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }}"),
            "ab1None ababab [1, 2]");
  EXPECT_EQ(Render("{{ -2 ** 2 }} {{ 2 + 3 * 4 }} {{ 7 - 2 - 1 }} {{ 'a' ~ 1 * 2 }}"), "4 14 4 a2");
  // `~` binds tighter than `+`: 1 + (2 ~ 3) adds an int and a string.
  EXPECT_FALSE(TryRender("{{ 1 + 2 ~ 3 }}").ok());
  EXPECT_EQ(Render("{{ 'it\\'s' }} {{ \"dq\" 'adj' }} {{ '\\u00e9\\x41' }}"),
            "it's dqadj \xC3\xA9"
            "A");
}

TEST(TemplateTest, ComparisonsAndLogic) {
  EXPECT_EQ(Render("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ [1,2] == [1,2] }} {{ 1 == 1.0 }}"),
            "True False True True");
  EXPECT_EQ(
      Render("{{ 'x' in 'xyz' }} {{ 'q' not in 'xyz' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }}"),
      "True True True True");
  EXPECT_EQ(Render("{{ 0 or 'default' }} {{ 'a' and 'b' }} {{ not 0 }} {{ not 'a' == 'b' }}"),
            "default b True True");
  EXPECT_EQ(
      Render("{{ 'y' if 1 > 0 else 'n' }} {{ 'y' if 0 }}| {{ 1 if false else 2 if true else 3 }}"),
      "y | 2");
}

TEST(TemplateTest, AttributesItemsSlices) {
  EXPECT_EQ(
      Render("{{ messages[0].role }} {{ messages[-1]['role'] }} {{ messages[5] }}|", kMessages),
      "system assistant |");
  EXPECT_EQ(
      Render("{{ messages[::-1] | map(attribute='role') | join(',') }} {{ messages[1:] | length }}",
             kMessages),
      "assistant,user,system 2");
  EXPECT_EQ(
      Render(
          "{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-2] }} {{ 'abcdef'[-2:] }} {{ 'h\xC3\xA9llo'[1] }}"),
      "bcd fdb ef \xC3\xA9");
  EXPECT_EQ(Render("{{ m.missing }}|{{ m.missing is defined }}", R"({"m": {"a": 1}})"), "|False");
}

TEST(TemplateTest, StringMethods) {
  EXPECT_EQ(
      Render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nq\\n'.lstrip('\\n') }}|"
             "{{ 'q\\n\\n'.rstrip() }}|"),
      "a b|a|q\n|q|");
  EXPECT_EQ(Render("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} "
                   "{{ 'a/b/c'.rsplit('/', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a/b', 'c']");
  EXPECT_EQ(Render("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} "
                   "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'aaa'.replace('a', "
                   "'b', 2) }}"),
            "True True Hello World Hello bba");
  EXPECT_EQ(Render("{{ 'hello'.find('l') }} {{ 'hello'.count('l') }} {{ ', '.join(['a', 'b']) }} "
                   "{{ '12'.isdigit() }} {{ 'Hi'.upper() }}"),
            "2 2 a, b True HI");
}

TEST(TemplateTest, Filters) {
  EXPECT_EQ(
      Render("{{ '  x  ' | trim }}|{{ 'hello world' | title }}|{{ 'hi there' | capitalize }}"),
      "x|Hello World|Hi there");
  EXPECT_EQ(Render("{{ [3,1,2] | length }} {{ 'h\xC3\xA9llo' | length }} {{ [3,1,2] | first }} "
                   "{{ [3,1,2] | last }}"),
            "3 5 3 2");
  EXPECT_EQ(Render("{{ x | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }}"),
            "d  d");
  EXPECT_EQ(Render("{{ {'b': 1, 'a': [1, 2.5, '\xC3\xA9', none, true]} | tojson }}"),
            "{\"b\": 1, \"a\": [1, 2.5, \"\xC3\xA9\", null, true]}");
  EXPECT_EQ(Render("{{ {'a': {'c': []}} | tojson(indent=2) }}"),
            "{\n  \"a\": {\n    \"c\": []\n  }\n}");
  EXPECT_EQ(
      Render("{{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ 4 | float }} {{ 2.5 | round }}"),
      "3 42 0 4.0 2.0");
  EXPECT_EQ(Render("{{ {'b': 2, 'a': 1} | items | list }} {{ {'b': 2, 'a': 1} | dictsort }}"),
            "[('b', 2), ('a', 1)] [('a', 1), ('b', 2)]");
  EXPECT_EQ(Render("{{ ['b', 'A', 'c'] | sort }} {{ [1, 2, 1] | unique | list }} {{ [1, 2] | "
                   "reverse | list }}"),
            "['A', 'b', 'c'] [1, 2] [2, 1]");
  EXPECT_EQ(Render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') "
                   "| list }}",
                   kMessages),
            "['Hi']");
  EXPECT_EQ(Render("{{ [0, 1, 2] | select | list }} {{ [0, 1, 2] | reject('odd') | list }} "
                   "{{ ['a', 'b'] | map('upper') | join }} {{ [1, 2, 3] | sum }}"),
            "[1, 2] [0, 2] AB 6");
  EXPECT_EQ(Render("{{ 'Tools: ' + ['a', 'b'] | join(', ') + '!' }}"), "Tools: a, b!");
  EXPECT_EQ(Render("{{ 'a\\nb\\n\\nc' | indent(2) }}"), "a\n  b\n\n  c");
  EXPECT_EQ(Render("{{ '%s has %d items (%.1f%%)' | format('cart', 3, 42.25) }}"),
            "cart has 3 items (42.2%)");
}

// Every name in the filter table, aliases included, reaches its filter; string filters take any
// value as its string.
TEST(TemplateTest, FilterNamesAndAliases) {
  EXPECT_EQ(Render("{{ x | d('y') }} {{ '<a&b>' | e }} {{ '<i>' | escape }} {{ 'abc' | count }} "
                   "{{ 5 | string }}{{ '<' | safe }}"),
            "y &lt;a&amp;b&gt; &lt;i&gt; 3 5<");
  EXPECT_EQ(Render("{{ 12 | upper }} {{ none | lower }} {{ 1234 | replace('2', 'x') }} "
                   "{{ x | trim }}| {{ 'aXb' | trim('a') }}"),
            "12 none 1x34 | Xb");
  EXPECT_EQ(Render("{{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [] | min }}| "
                   "{{ [{'a': 1}, {'a': 2}] | sum(attribute='a') }} {{ -3 | abs }}"),
            "1 3 | 3 3");
  EXPECT_EQ(
      Render("{{ [1, 2, 3] | join('-') }} {{ 'ab' | reverse }} {{ ['x', 'y'] | first | upper }}"),
      "1-2-3 ba X");
  EXPECT_EQ(Render("{{ [{'r': 'a'}, {'r': 'b'}] | rejectattr('r', 'equalto', 'a') "
                   "| map(attribute='r') | list }} {{ [1, 0] | reject | list }}"),
            "['b'] [0]");
  auto unknown = TryRender("{{ 'x' | nope }}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown filter 'nope'"));
}

TEST(TemplateTest, Tests) {
  EXPECT_EQ(Render("{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 1 is integer }} "
                   "{{ 1.0 is float }} {{ 'a' is string }} {{ {} is mapping }}",
                   R"({"x": 1})"),
            "True True True True True True True");
  EXPECT_EQ(
      Render("{{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 1 is not eq 2 }} {{ 2 is in [1, 2] }} "
             "{{ x is not none and x is string }}",
             R"({"x": "s"})"),
      "True True True True True");
}

TEST(TemplateTest, ScopingAndNamespaces) {
  // Assignments inside a loop do not leak out; namespace attributes do.
  EXPECT_EQ(Render("{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor "
                   "%} {{ x }}"),
            "inner outer");
  EXPECT_EQ(Render("{% set ns = namespace(found=false, n=0) %}{% for i in range(5) %}"
                   "{% if i == 3 %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ ns.found }} {{ ns.n }}"),
            "True 10");
  EXPECT_EQ(Render("{% set a = 1 %}{% set b, c = [2, 3] %}{{ a + b + c }}"), "6");
  EXPECT_EQ(Render("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[inner 2]");
}

TEST(TemplateTest, Loops) {
  EXPECT_EQ(Render("{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ loop.first }}"
                   "{{ loop.last }}{{ loop.revindex0 }};{% endfor %}",
                   kMessages),
            "1/3:TrueFalse2;2/3:FalseFalse1;3/3:FalseTrue0;");
  EXPECT_EQ(Render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                   "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0134");
  EXPECT_EQ(Render("{% for i in [] %}x{% else %}empty{% endfor %} {% for i in range(1, 10, 3) %}{{ "
                   "i }}{% endfor %}"),
            "empty 147");
  EXPECT_EQ(Render("{% for i in range(6) if i is odd %}{{ loop.index0 }}:{{ i }} {% endfor %}"),
            "0:1 1:3 2:5 ");
  EXPECT_EQ(Render("{% for k, v in {'b': 2, 'a': 1} | items %}{{ k }}={{ v }};{% endfor %}"),
            "b=2;a=1;");
  EXPECT_EQ(Render("{% for c in 'h\xC3\xA9y' %}[{{ c }}]{% endfor %}"), "[h][\xC3\xA9][y]");
  EXPECT_EQ(Render("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
}

TEST(TemplateTest, Macros) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Bob') }} {{ greet('Al', punct='?') }}"),
            "Hi Bob! Hi Al?");
}

TEST(TemplateTest, RuntimeErrors) {
  EXPECT_THAT(std::string(TryRender("line\n{{ x.y.z }}").status().message()),
              HasSubstr("template line 2: 'x' is undefined"));
  EXPECT_FALSE(TryRender("{{ 1 + 'a' }}").ok());
  EXPECT_FALSE(TryRender("{{ undefined_var + 1 }}").ok());
  EXPECT_FALSE(TryRender("{% for x in 3 %}{% endfor %}").ok());
  EXPECT_FALSE(TryRender("{{ 'a' | no_such_filter }}").ok());
  EXPECT_FALSE(TryRender("{{ 1 is no_such_test }}").ok());
  EXPECT_FALSE(TryRender("{% set ns = 1 %}{% set ns.a = 2 %}").ok());
  EXPECT_FALSE(TryRender("{{ messages[10].role }}", kMessages).ok());
}

// Found by tests/fuzz/chat_template_fuzzer.cc: integer arithmetic went through double and wrapped
// past 64 bits (undefined behaviour); `**` looped once per unit of the exponent.
TEST(TemplateTest, IntegerArithmeticPastSixtyFourBitsIsAnErrorNotAWrap) {
  EXPECT_EQ(Render("{{ 9223372036854775806 + 1 }} {{ -9223372036854775807 - 1 }}"),
            "9223372036854775807 -9223372036854775808");
  EXPECT_EQ(Render("{{ 9007199254740993 + 0 }}"), "9007199254740993");  // not rounded via double
  EXPECT_EQ(Render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 9223372036854775807 }}"),
            "4611686018427387904 -9223372036854775808 1");
  EXPECT_EQ(Render("{{ -7 // 2 }} {{ -7 % 2 }} {{ 7 % -2 }} {{ true + true }}"), "-4 1 -1 2");
  for (const char* overflow :
       {"{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}",
        "{{ 4294967296 * 4294967296 }}", "{{ 2 ** 63 }}", "{{ 3 ** 9223372036854775807 }}",
        "{{ -(-9223372036854775807 - 1) }}", "{{ (-9223372036854775807 - 1) // -1 }}"}) {
    auto out = TryRender(overflow);
    ASSERT_FALSE(out.ok()) << overflow << " gave " << *out;
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("integer overflow")) << overflow;
  }
  EXPECT_EQ(Render("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
  EXPECT_THAT(std::string(TryRender("{{ 99999999999999999999 }}").status().message()),
              HasSubstr("does not fit in 64 bits"));
}

TEST(TemplateTest, IntFilterAndRangeStayInSixtyFourBits) {
  EXPECT_EQ(Render("{{ 2.9 | int }} {{ -2.9 | int }} {{ '12' | int }} {{ 'x' | int(7) }}"),
            "2 -2 12 7");
  EXPECT_EQ(Render("{{ (1e400 * 0) | int(5) }} {{ 1e400 | int(6) }}"), "5 6");  // NaN, inf
  EXPECT_FALSE(TryRender("{{ 1e300 | int }}").ok());
  EXPECT_FALSE(TryRender("{{ '99999999999999999999' | int }}").ok());
  EXPECT_EQ(Render("{{ range(5, 0, -2) | list }} {{ range(0, 5, 2) | list }} {{ range(3, 1) | "
                   "list }}"),
            "[5, 3, 1] [0, 2, 4] []");
  EXPECT_FALSE(TryRender("{{ range(-9223372036854775807 - 1, 9223372036854775807) }}").ok());
  EXPECT_EQ(Render("{{ range(9223372036854775806, 9223372036854775807, 100) | list }}"),
            "[9223372036854775806]");
}

// Found by the fuzzer: `{% set ns.o = ns %}` made a reference cycle that leaked the namespace, and
// printing it recursed forever.
TEST(TemplateTest, ANamespaceCannotHoldItselfAndCyclesAreFreed) {
  auto self = TryRender("{% set ns = namespace(a=1) %}{% set ns.o = ns %}{{ ns }}");
  ASSERT_FALSE(self.ok());
  EXPECT_THAT(std::string(self.status().message()), HasSubstr("inside itself"));
  EXPECT_FALSE(TryRender("{% set ns = namespace() %}{% set ns.o = [1, {'k': [ns]}] %}").ok());
  // A cycle through a bound method is legal (Python allows it); the render frees it (LeakSanitizer
  // in scripts/sanitize.sh checks this test).
  EXPECT_EQ(Render("{% set ns = namespace(n=1) %}{% set d = {'ns': ns} %}{% set ns.get = d.get %}"
                   "{{ ns.get('ns').n }}"),
            "1");
  // Through another namespace: a.y → b → a.
  EXPECT_FALSE(TryRender("{% set a = namespace(x=1) %}{% set b = namespace(a=a) %}"
                         "{% set a.y = [b] %}")
                   .ok());
  EXPECT_EQ(Render("{% set a = namespace(x=1) %}{% set b = namespace(a=a) %}{% set b.z = [a] %}"
                   "{{ b.z[0].x }}{{ b.a.x }}"),
            "11");
}

// Found by the fuzzer: 4 KB of "((((" overflowed the stack in the parser. Nesting, depth and
// recursion are bounded everywhere a template can recurse, each with an error that says so.
TEST(TemplateTest, NoTemplateCanExhaustTheStack) {
  auto error_of = [](const std::string& source) {
    auto out = TryRender(source);
    return out.ok() ? std::string("rendered") : std::string(out.status().message());
  };
  EXPECT_EQ(Render("{{ " + std::string(40, '(') + "1" + std::string(40, ')') + " }}"), "1");
  EXPECT_THAT(error_of("{{ " + std::string(3000, '(') + "1" + std::string(3000, ')') + " }}"),
              HasSubstr("nested more than"));
  EXPECT_THAT(error_of("{{ " + std::string(3000, '[') + "1" + std::string(3000, ']') + " }}"),
              HasSubstr("nested more than"));
  std::string nots;
  for (int i = 0; i < 3000; ++i) nots += "not ";
  EXPECT_THAT(error_of("{{ " + nots + "1 }}"), HasSubstr("nested more than"));
  EXPECT_THAT(error_of("{{ " + std::string(3000, '-') + "1 }}"), HasSubstr("nested more than"));
  // Longer than any of those: refused before parsing.
  EXPECT_THAT(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
              HasSubstr("8192 tokens"));
  std::string chain = "1";
  for (int i = 0; i < 3000; ++i) chain += " + 1";
  EXPECT_THAT(error_of("{{ " + chain + " }}"), HasSubstr("operations deep"));
  std::string long_chain = "1";
  for (int i = 0; i < 100000; ++i) long_chain += "+1";
  EXPECT_THAT(error_of("{{ " + long_chain + " }}"), HasSubstr("tokens"));
  std::string attrs = "x";
  for (int i = 0; i < 3000; ++i) attrs += ".a";
  EXPECT_THAT(error_of("{{ " + attrs + " }}"), HasSubstr("operations deep"));
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  EXPECT_THAT(error_of(ifs), HasSubstr("blocks nested more than"));
  EXPECT_THAT(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("recursion deeper than"));
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}done{% endif %}"
                   "{% endmacro %}{{ f(50) }}"),
            "done");
}

TEST(TemplateTest, ParseErrors) {
  for (const char* bad :
       {"{% if %}{% endif %}", "{% if x %}", "{% endfor %}", "{{ (1, }}",
        "{% for in x %}{% endfor %}", "{% extends 'base' %}", "{{ f(a=1, 2) }}"}) {
    EXPECT_FALSE(Template::Parse(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace tandem::jinja
