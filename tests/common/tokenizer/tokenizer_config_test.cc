#include "common/tokenizer/tokenizer_config.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

class TokenizerConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tokenizer_config_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void Write(const std::string& name, const std::string& contents) {
    std::ofstream(dir_ + "/" + name) << contents;
  }
  std::string dir_;
};

TEST_F(TokenizerConfigTest, StringTemplateAndPlainTokens) {
  Write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true,
      "clean_up_tokenization_spaces": true, "tokenizer_class": "LlamaTokenizer",
      "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"})");
  auto config = LoadTokenizerConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bos_token, "<s>");
  EXPECT_EQ(config->eos_token, "</s>");
  EXPECT_EQ(config->pad_token, std::nullopt);
  EXPECT_EQ(config->add_bos_token, true);
  EXPECT_EQ(config->add_eos_token, std::nullopt);
  EXPECT_TRUE(config->clean_up_tokenization_spaces);
  EXPECT_EQ(config->tokenizer_class, "LlamaTokenizer");
  EXPECT_THAT(config->chat_template, HasSubstr("bos_token"));
  EXPECT_EQ(config->named_chat_templates.at("default"), config->chat_template);
}

TEST_F(TokenizerConfigTest, AddedTokenObjectsAndNamedTemplates) {
  Write("tokenizer_config.json", R"({
      "bos_token": {"__type": "AddedToken", "content": "<|begin|>", "lstrip": false},
      "eos_token": {"content": "<|end|>"}, "unk_token": null,
      "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  auto config = LoadTokenizerConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bos_token, "<|begin|>");
  EXPECT_EQ(config->eos_token, "<|end|>");
  EXPECT_EQ(config->unk_token, std::nullopt);
  EXPECT_EQ(config->chat_template, "D");
  EXPECT_EQ(config->named_chat_templates.at("tool_use"), "T");
}

TEST_F(TokenizerConfigTest, TemplateFilesBesideTheConfig) {
  Write("tokenizer_config.json", R"({"eos_token": "<e>"})");
  Write("chat_template.json", R"({"chat_template": "from json"})");
  auto config = LoadTokenizerConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->chat_template, "from json");
  Write("chat_template.jinja", "from jinja\n");
  config = LoadTokenizerConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->chat_template, "from jinja\n");
}

TEST_F(TokenizerConfigTest, NoTemplate) {
  Write("tokenizer_config.json", "{}");
  auto config = LoadTokenizerConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->chat_template, "");
  EXPECT_TRUE(config->named_chat_templates.empty());
}

TEST_F(TokenizerConfigTest, ErrorsNameFileAndField) {
  EXPECT_EQ(LoadTokenizerConfig(dir_).status().code(), absl::StatusCode::kNotFound);
  Write("tokenizer_config.json", "{oops");
  EXPECT_THAT(std::string(LoadTokenizerConfig(dir_).status().message()),
              HasSubstr("tokenizer_config.json: not valid JSON"));
  Write("tokenizer_config.json", R"({"bos_token": 5})");
  EXPECT_THAT(std::string(LoadTokenizerConfig(dir_).status().message()), HasSubstr("bos_token"));
  Write("tokenizer_config.json", R"({"chat_template": [{"name": "x"}]})");
  EXPECT_THAT(std::string(LoadTokenizerConfig(dir_).status().message()),
              HasSubstr("chat_template[0]"));
  Write("tokenizer_config.json", R"({"add_bos_token": "yes"})");
  EXPECT_THAT(std::string(LoadTokenizerConfig(dir_).status().message()),
              HasSubstr("add_bos_token"));
}

}  // namespace
}  // namespace tandem
