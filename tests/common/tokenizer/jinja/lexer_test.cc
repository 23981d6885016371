// Whitespace handling of the Hugging Face chat-template environment (trim_blocks,
// lstrip_blocks, '-' and '+' modifiers, keep_trailing_newline off), checked through rendering.
#include "common/tokenizer/jinja/lexer.h"

#include "common/tokenizer/jinja/template.h"
#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

std::string LexAndRender(const std::string& source) {
  auto t = Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "<parse error>";
  auto out = t->Render(ValueDict());
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<render error>";
}

TEST(LexerTest, TrimAndLstripBlocks) {
  // The newline after a block tag goes; indentation before a block tag goes.
  EXPECT_EQ(LexAndRender("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(LexAndRender("{% for i in range(3) %}\n  {{ i }}\n{% endfor %}\n"), "  0\n  1\n  2\n");
  // Output tags are not trimmed.
  EXPECT_EQ(LexAndRender("  {{ 'x' }}  \ny"), "  x  \ny");
  // Indentation before a tag that does not start the line stays.
  EXPECT_EQ(LexAndRender("text {% if true %}x{% endif %}   {% if true %}y{% endif %}"),
            "text x   y");
  EXPECT_EQ(LexAndRender("    {% if true %}indented{% endif %}"), "indented");
}

TEST(LexerTest, MinusAndPlusModifiers) {
  EXPECT_EQ(LexAndRender("a {%- if true -%} b {%- endif -%} c"), "abc");
  EXPECT_EQ(LexAndRender("{%- for i in range(3) -%}\n  [{{- i -}}]\n{%- endfor %}"), "[0][1][2]");
  EXPECT_EQ(LexAndRender("a\n{%+ if true %}x{% endif +%}\nb"), "a\nx\nb");
  EXPECT_EQ(LexAndRender("x {{- ' y ' -}} z"), "x y z");
}

TEST(LexerTest, CommentsRawAndNewlines) {
  EXPECT_EQ(LexAndRender("a{# note #}b\n  {#- c -#}  c"), "abc");
  EXPECT_EQ(LexAndRender("{# on its own line #}\nnext"), "next");
  EXPECT_EQ(LexAndRender("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
  EXPECT_EQ(LexAndRender("x\r\ny\r\n{% if true %}\r\nz{% endif %}"), "x\ny\nz");
  // One trailing newline of the template is dropped.
  EXPECT_EQ(LexAndRender("end\n"), "end");
  EXPECT_EQ(LexAndRender("end\n\n"), "end\n");
}

TEST(LexerTest, Tokens) {
  auto tokens = Lex("t{{ a.b(1, 'x\\n', 2.5e1) | f }}{% if x >= -1 %}");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].text, "t");
  const auto& expr = (*tokens)[1].tokens;
  ASSERT_EQ(expr.size(), 13u);
  EXPECT_EQ(expr[0].text, "a");
  EXPECT_EQ(expr[4].int_value, 1);
  EXPECT_EQ(expr[6].kind, ExprToken::Kind::kString);
  EXPECT_EQ(expr[6].text, "x\n");
  EXPECT_EQ(expr[8].float_value, 25.0);
  EXPECT_EQ(expr[12].kind, ExprToken::Kind::kEnd);
  EXPECT_EQ((*tokens)[2].tokens[2].text, ">=");
}

TEST(LexerTest, Errors) {
  EXPECT_FALSE(Lex("{{ 'unterminated }}").ok());
  EXPECT_FALSE(Lex("{% if x").ok());
  EXPECT_FALSE(Lex("{# never closed").ok());
  EXPECT_FALSE(Lex("{{ a $ b }}").ok());
  EXPECT_FALSE(Lex("{% raw %}no end").ok());
}

}  // namespace
}  // namespace tandem::jinja
