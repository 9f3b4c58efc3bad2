// The docs test: README.md is the front page (the two commands first, at most 300 lines), and
// every shell block of README.md and docs/*.md marked `<!-- test: run -->` runs and shows
// output of the shape it prints (doc_blocks.hpp has the convention). One test per block,
// named after its page and line, so a failure says which block to fix.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/docs/doc_blocks.hpp"

namespace fs = std::filesystem;
using stratagem::docs::DocBlock;

namespace {

const fs::path kSource = STRATAGEM_SOURCE_DIR;
// build/apps/stratagem → build
const fs::path kBuild = fs::path(STRATAGEM_BINARY).parent_path().parent_path();

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const fs::path& p) {
  std::string out = "'";
  for (char c : p.string()) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<fs::path> pages() {
  std::vector<fs::path> out = {"README.md"};
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(kSource / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(fs::relative(e.path(), kSource));
  }
  std::sort(docs.begin(), docs.end());
  out.insert(out.end(), docs.begin(), docs.end());
  return out;
}

// Runs the block in a fresh directory that links the repository's top-level entries (and
// `build` to this build), with the built tools on PATH.
void run_block(const DocBlock& b) {
  switch (b.mark) {
    case DocBlock::Mark::none:
      FAIL() << b.file << ":" << b.line << ": a " << b.lang
             << " block without `<!-- test: run -->` or `<!-- test: skip REASON -->` on the "
                "line above its fence";
    case DocBlock::Mark::malformed:
      FAIL() << b.file << ":" << b.line << ": " << b.reason;
    case DocBlock::Mark::skip:
      GTEST_SKIP() << b.file << ":" << b.line << ": " << b.reason;
    case DocBlock::Mark::run:
      break;
  }
  std::string tmpl = (fs::temp_directory_path() / "stratagem-docs-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  for (const auto& e : fs::directory_iterator(kSource)) {
    const auto name = e.path().filename();
    if (name == ".git" || name == "build") continue;
    fs::create_symlink(e.path(), dir / name);
  }
  fs::create_directory_symlink(kBuild, dir / "build");
  std::ofstream(dir / "block.sh") << b.script;
  // Each block gets its own host-profile cache (engine/scenario/host.hpp), as a fresh machine has.
  const std::string cmd = "cd " + quote(dir) + " && STRATAGEM_CACHE_DIR=" + quote(dir / "cache") +
                          " PATH=" + quote(kBuild / "apps") +
                          ":\"$PATH\" timeout -k 10 300 bash -e -o pipefail block.sh " +
                          "> output.txt 2>&1 < /dev/null";
  const int status = std::system(cmd.c_str());
  const std::string out = read(dir / "output.txt");
  std::error_code ec;
  fs::remove_all(dir, ec);
  const std::string tail = out.size() > 6000 ? "…" + out.substr(out.size() - 6000) : out;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << b.file << ":" << b.line << ": the block exited with "
      << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << (WIFEXITED(status) && WEXITSTATUS(status) == 124 ? " (timed out after 300 s)" : "")
      << "\n--- block ---\n" << b.script << "--- output ---\n" << tail;
  if (b.expected) {
    std::string missing;
    EXPECT_TRUE(stratagem::docs::output_matches(*b.expected, out, &missing))
        << b.file << ":" << b.line << ": the output no longer shows the line\n  " << missing
        << "\n(numbers aside)\n--- output ---\n" << tail;
  }
}

class BlockTest : public testing::Test {
 public:
  explicit BlockTest(DocBlock b) : block_(std::move(b)) {}
  void TestBody() override { run_block(block_); }

 private:
  DocBlock block_;
};

// One test per shell block, registered when the binary starts (so ctest lists each).
const bool registered = [] {
  for (const fs::path& page : pages()) {
    for (DocBlock& b : stratagem::docs::extract_blocks(page.string(), read(kSource / page))) {
      std::string name = page.string() + "_L" + std::to_string(b.line);
      std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c) && c != '_'; },
                      '_');
      const int line = b.line;
      testing::RegisterTest("DocBlocks", name.c_str(), nullptr, nullptr, __FILE__, line,
                            [b = std::move(b)]() -> testing::Test* { return new BlockTest(b); });
    }
  }
  return true;
}();

TEST(Readme, StartsWithTheTwoCommandsAndFitsOnAFrontPage) {
  const std::string readme = read(kSource / "README.md");
  const auto lines = std::count(readme.begin(), readme.end(), '\n');
  EXPECT_LE(lines, 300) << "README.md has " << lines << " lines; move detail into docs/";
  const auto blocks = stratagem::docs::extract_blocks("README.md", readme);
  ASSERT_FALSE(blocks.empty());
  // Its first code block of any language is the two commands.
  const auto first_fence = readme.find("```");
  ASSERT_EQ(readme.compare(first_fence, 5, "```sh"), 0) << "the first code block is not sh";
  std::istringstream cmds(blocks.front().script);
  std::vector<std::string> got;
  for (std::string l; std::getline(cmds, l);) {
    if (!l.empty()) got.push_back(l);
  }
  ASSERT_EQ(got.size(), 2u) << "the README's first block holds " << got.size() << " commands";
  EXPECT_NE(got[0].find("stratagem compare"), std::string::npos) << got[0];
  EXPECT_NE(got[1].find("ctest"), std::string::npos) << got[1];
  // CI runs exactly the second.
  EXPECT_NE(read(kSource / ".ci/run").find(got[1]), std::string::npos)
      << ".ci/run does not run the README's second command: " << got[1];
}

TEST(DocBlocksParse, MarkersOutputsAndConsoleTranscripts) {
  const std::string page =
      "text\n"
      "<!-- test: run -->\n"
      "```sh\n"
      "stratagem info gpt2\n"
      "```\n"
      "\n"
      "<!-- test: output -->\n"
      "```text\n"
      "model gpt2: 124.4 M parameters\n"
      "```\n"
      "<!-- test: skip needs a GPU -->\n"
      "```sh\n"
      "stratagem run x --gpu\n"
      "```\n"
      "```bash\n"
      "echo unmarked\n"
      "```\n"
      "<!-- test: runn -->\n"
      "```console\n"
      "$ echo a\n"
      "a\n"
      "$ echo b\n"
      "```\n"
      "```json\n"
      "{\"not\": \"a shell block\"}\n"
      "```\n";
  const auto b = stratagem::docs::extract_blocks("p.md", page);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].mark, DocBlock::Mark::run);
  EXPECT_EQ(b[0].line, 3);
  EXPECT_EQ(b[0].script, "stratagem info gpt2\n");
  ASSERT_TRUE(b[0].expected);
  EXPECT_EQ(b[0].expected->at(0), "model gpt2: 124.4 M parameters");
  EXPECT_EQ(b[1].mark, DocBlock::Mark::skip);
  EXPECT_EQ(b[1].reason, "needs a GPU");
  EXPECT_FALSE(b[1].expected);
  EXPECT_EQ(b[2].mark, DocBlock::Mark::none);
  EXPECT_EQ(b[3].mark, DocBlock::Mark::malformed);
  EXPECT_EQ(b[3].script, "echo a\necho b\n");
  ASSERT_TRUE(b[3].expected);
  EXPECT_EQ(*b[3].expected, std::vector<std::string>{"a"});
}

TEST(DocBlocksShape, NumbersAndSpacingAsideLinesMustAppearInOrder) {
  using stratagem::docs::output_matches;
  using stratagem::docs::shape_of;
  EXPECT_EQ(shape_of("  step   1.25 ms  (3,072 tokens) 12:30"), "step # ms (# tokens) #");
  EXPECT_EQ(shape_of("──────── ---- == -x-"), "─ - = -x-");
  const std::string actual = "header\nrow 1: 10.5 ms\nnoise\nrow 2: 9 ms\nfooter\n";
  EXPECT_TRUE(output_matches({"header", "row 7: 1.0 ms", "...", "footer"}, actual));
  std::string missing;
  EXPECT_FALSE(output_matches({"footer", "header"}, actual, &missing));  // order matters
  EXPECT_EQ(missing, "header");
  EXPECT_FALSE(output_matches({"row 1: 10.5 s"}, actual, &missing));  // a unit is no number
  EXPECT_FALSE(output_matches({"header", "gone"}, actual, &missing));
  EXPECT_EQ(missing, "gone");
}

}  // namespace
