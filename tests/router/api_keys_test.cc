#include "router/api_keys.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

std::shared_ptr<ApiKeys> Keys(std::vector<std::string> keys, std::string file = "") {
  absl::StatusOr<std::shared_ptr<ApiKeys>> k = ApiKeys::Create(std::move(keys), std::move(file));
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? *k : nullptr;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeysTest, BearerSchemeAsRfc6750Says) {
  auto keys = Keys({"sk-123"});
  EXPECT_TRUE(keys->Authorizes("Bearer sk-123"));
  EXPECT_TRUE(keys->Authorizes("bearer sk-123"));  // the scheme in any case
  EXPECT_TRUE(keys->Authorizes("BEARER sk-123"));
  EXPECT_TRUE(keys->Authorizes("Bearer  sk-123 "));  // 1*SP, trailing whitespace
  EXPECT_FALSE(keys->Authorizes("Bearer sk-124"));
  EXPECT_FALSE(keys->Authorizes("Bearer sk-12"));
  EXPECT_FALSE(keys->Authorizes("Bearer sk-1234"));
  EXPECT_FALSE(keys->Authorizes("Basic sk-123"));
  EXPECT_FALSE(keys->Authorizes("Bearersk-123"));   // no space after the scheme
  EXPECT_FALSE(keys->Authorizes("Bearer sk 123"));  // a token has no inner space
  EXPECT_FALSE(keys->Authorizes("Bearer sk-123, Bearer x"));
  EXPECT_FALSE(keys->Authorizes("sk-123"));
  EXPECT_FALSE(keys->Authorizes(""));
  EXPECT_FALSE(keys->Authorizes("Bearer "));
}

TEST(ApiKeysTest, BearerTokenParsesTheB64TokenGrammar) {
  EXPECT_EQ(BearerToken("Bearer abc+/=="), "abc+/==");
  EXPECT_EQ(BearerToken("Bearer a.b_c~d-e"), "a.b_c~d-e");
  EXPECT_EQ(BearerToken("Bearer ==abc"), "");  // '=' only at the end
  EXPECT_EQ(BearerToken("Bearer ab=c"), "");
  EXPECT_EQ(BearerToken("Bearer a\"b"), "");
}

TEST(ApiKeysTest, SeveralKeysAndNone) {
  auto keys = Keys({"k1", "k2"});
  EXPECT_TRUE(keys->enabled());
  EXPECT_TRUE(keys->Authorizes("Bearer k1"));
  EXPECT_TRUE(keys->Authorizes("Bearer k2"));
  EXPECT_FALSE(keys->Authorizes("Bearer k3"));
  auto none = Keys({});
  EXPECT_FALSE(none->enabled());
  EXPECT_TRUE(none->Authorizes(""));
}

TEST(ApiKeysTest, RefusesKeysOutsideTheTokenGrammar) {
  EXPECT_FALSE(ApiKeys::Create({"has space"}, "").ok());
  EXPECT_FALSE(ApiKeys::Create({""}, "").ok());
  const std::string bad = WriteFile("bad_keys", "good\nbad key\n");
  absl::StatusOr<std::shared_ptr<ApiKeys>> k = ApiKeys::Create({}, bad);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find(":2"), std::string_view::npos) << k.status();
  EXPECT_FALSE(ApiKeys::Create({}, testing::TempDir() + "/no_such_file").ok());
}

TEST(ApiKeysTest, FileKeysReloadAndABadReloadKeepsTheOldKeys) {
  const std::string path = WriteFile("keys", "# rotated monthly\nfile-a\n\n  file-b  \n");
  auto keys = Keys({"literal"}, path);
  EXPECT_EQ(keys->size(), 3u);
  EXPECT_TRUE(keys->Authorizes("Bearer file-a"));
  EXPECT_TRUE(keys->Authorizes("Bearer file-b"));
  EXPECT_TRUE(keys->Authorizes("Bearer literal"));

  WriteFile("keys", "file-c\n");
  ASSERT_TRUE(keys->Reload().ok());
  EXPECT_FALSE(keys->Authorizes("Bearer file-a"));
  EXPECT_TRUE(keys->Authorizes("Bearer file-c"));
  EXPECT_TRUE(keys->Authorizes("Bearer literal"));

  WriteFile("keys", "# emptied by mistake\n");
  EXPECT_FALSE(keys->Reload().ok());
  EXPECT_TRUE(keys->Authorizes("Bearer file-c"));  // still the last good keys
}

}  // namespace
}  // namespace tandem
