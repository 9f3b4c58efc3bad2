// This host's identity and where its measured CPU profile is cached (engine/scenario/host.hpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <regex>
#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/host.hpp"

namespace stratagem::scenario {
namespace {

/// Sets (or with nullopt unsets) an environment variable for the test's scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Host, KeyIsTheSanitisedHostNameAndAStableHardwareHash) {
  const std::string key = host_key();
  EXPECT_TRUE(std::regex_match(key, std::regex("[A-Za-z0-9._-]+-[0-9a-f]{16}"))) << key;
  EXPECT_EQ(key, host_key());
  const std::string name = hostname();
  if (!name.empty() && name.find('/') == std::string::npos) {
    EXPECT_EQ(key.rfind(name + "-", 0), 0u) << key << " / " << name;
  }
}

TEST(Host, CacheDirectoryFollowsStratagemThenXdgThenHome) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    ScopedEnv own("STRATAGEM_CACHE_DIR", "/own/cache");
    EXPECT_EQ(cache_dir(), std::filesystem::path("/own/cache"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    ScopedEnv own("STRATAGEM_CACHE_DIR", std::nullopt);
    EXPECT_EQ(cache_dir(), std::filesystem::path("/xdg/stratagem"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "");  // empty counts as unset
    ScopedEnv own("STRATAGEM_CACHE_DIR", std::nullopt);
    EXPECT_EQ(cache_dir(), std::filesystem::path("/home/someone/.cache/stratagem"));
  }
}

TEST(Host, WithoutAnyCacheVariableTheErrorNamesThem) {
  ScopedEnv home("HOME", std::nullopt);
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv own("STRATAGEM_CACHE_DIR", std::nullopt);
  try {
    (void)cache_dir();
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("STRATAGEM_CACHE_DIR"), std::string::npos) << e.what();
  }
}

TEST(Host, ProfilePathIsPerHostAndProcessCount) {
  ScopedEnv own("STRATAGEM_CACHE_DIR", "/c");
  EXPECT_EQ(host_profile_path(2),
            std::filesystem::path("/c/cpu-m" + std::to_string(kHostMeasurementVersion) + "-" +
                                  host_key() + "-x2.json"));
  EXPECT_NE(host_profile_path(2), host_profile_path(4));
  EXPECT_THROW((void)host_profile_path(0), SpecError);
}

TEST(Host, MachineFactsAreReadable) {
  EXPECT_FALSE(cpu_model().empty());
  EXPECT_GE(load_average(), 0.0);
  EXPECT_TRUE(std::regex_match(utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << utc_now();
}

}  // namespace
}  // namespace stratagem::scenario
