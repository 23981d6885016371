#include "common/tokenizer/jinja/value.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

TEST(ValueTest, PythonStrAndRepr) {
  EXPECT_EQ(Value(true).Str(), "True");
  EXPECT_EQ(Value::MakeNone().Str(), "None");
  EXPECT_EQ(Value::MakeUndefined("x").Str(), "");
  EXPECT_EQ(Value(int64_t{-42}).Str(), "-42");
  EXPECT_EQ(Value("it's").Repr(), "\"it's\"");
  EXPECT_EQ(Value("a'b\"c\n").Repr(), "'a\\'b\"c\\n'");
  EXPECT_EQ(Value(ValueList{Value(1), Value("a"), Value::MakeNone()}).Str(), "[1, 'a', None]");
  EXPECT_EQ(Value::MakeTuple({Value(1)}).Str(), "(1,)");
  ValueDict d;
  d.Set("k", Value(2.5));
  EXPECT_EQ(Value(d).Str(), "{'k': 2.5}");
}

TEST(ValueTest, FloatsFormatLikePython) {
  EXPECT_EQ(FormatFloat(1.0), "1.0");
  EXPECT_EQ(FormatFloat(0.1), "0.1");
  EXPECT_EQ(FormatFloat(2.5), "2.5");
  EXPECT_EQ(FormatFloat(-0.0001), "-0.0001");
  EXPECT_EQ(FormatFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatFloat(1e16), "1e+16");
  EXPECT_EQ(FormatFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(FormatFloat(123456789.125), "123456789.125");
  EXPECT_EQ(FormatFloat(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatFloat(1.0 / 3), "0.3333333333333333");
}

TEST(ValueTest, JsonLikePythonJsonDumps) {
  auto v = Value::FromJson(nlohmann::ordered_json::parse(
      R"({"z": 1, "a": [true, null, 1.5, "\u00e9\n\"\u0001"], "e": {}, "l": []})"));
  EXPECT_EQ(
      *v.ToJson(std::nullopt),
      "{\"z\": 1, \"a\": [true, null, 1.5, \"\xC3\xA9\\n\\\"\\u0001\"], \"e\": {}, \"l\": []}");
  EXPECT_EQ(
      *v.ToJson(std::nullopt, /*sort_keys=*/true),
      "{\"a\": [true, null, 1.5, \"\xC3\xA9\\n\\\"\\u0001\"], \"e\": {}, \"l\": [], \"z\": 1}");
  EXPECT_EQ(*Value::FromJson(nlohmann::ordered_json::parse(R"({"a": [1, {"b": 2}]})")).ToJson(2),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ]\n}");
  EXPECT_FALSE(Value::MakeUndefined("u").ToJson(std::nullopt).ok());
}

TEST(ValueTest, EqualityAndOrdering) {
  EXPECT_TRUE(Value(1).Equals(Value(1.0)));
  EXPECT_TRUE(Value(true).Equals(Value(1)));
  EXPECT_FALSE(Value("1").Equals(Value(1)));
  EXPECT_FALSE(Value(ValueList{Value(1)}).Equals(Value::MakeTuple({Value(1)})));
  EXPECT_TRUE(*Value("a").Less(Value("b")));
  EXPECT_TRUE(*Value(ValueList{Value(1), Value(2)}).Less(Value(ValueList{Value(1), Value(3)})));
  EXPECT_FALSE(Value("a").Less(Value(1)).ok());
}

TEST(ValueTest, Truthiness) {
  EXPECT_FALSE(Value("").Truthy());
  EXPECT_FALSE(Value(ValueList{}).Truthy());
  EXPECT_FALSE(Value(0.0).Truthy());
  EXPECT_FALSE(Value::MakeUndefined("x").Truthy());
  EXPECT_TRUE(Value("0").Truthy());
  EXPECT_TRUE(Value(ValueList{Value::MakeNone()}).Truthy());
}

}  // namespace
}  // namespace tandem::jinja
