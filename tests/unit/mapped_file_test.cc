// MappedFile (Note [Reading files through a mapping]): what it maps and what
// it leaves to a plain read, its bytes, and the message a file that shrinks
// under its mapping leaves before the process dies of SIGBUS.
#include "runtime/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/error.h"
#include "test_files.h"

namespace ddp {
namespace {

using ddp::testing::TempDir;

void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(MappedFile, MapsARegularFileWithItsBytes) {
  TempDir dir;
  std::string bytes(3 * 4096 + 17, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 7 % 251);
  writeAll(dir.file("f"), bytes);
  const auto mapped = MappedFile::map(dir.file("f"));
  ASSERT_NE(mapped, nullptr);
  ASSERT_EQ(mapped->bytes().size(), bytes.size());
  EXPECT_EQ(std::string(mapped->bytes().data(), bytes.size()), bytes);
  const char* begin = mapped->bytes().data();
  EXPECT_TRUE(mapped->contains(begin, bytes.size()));
  EXPECT_TRUE(mapped->contains(begin + bytes.size(), 0));
  EXPECT_FALSE(mapped->contains(begin + 1, bytes.size()));
  EXPECT_FALSE(mapped->contains(begin - 1, 1));
  // Released pages read back from the file; partial pages are kept.
  mapped->release(begin + 100, 2 * 4096);
  mapped->release(begin, bytes.size());
  EXPECT_EQ(std::string(mapped->bytes().data(), bytes.size()), bytes);
  EXPECT_THROW(mapped->release(begin + 1, bytes.size()), InternalError);
}

TEST(MappedFile, LeavesWhatCannotBeMappedToAPlainReadAndRefusesTheRest) {
  TempDir dir;
  writeAll(dir.file("empty"), "");
  EXPECT_EQ(MappedFile::map(dir.file("empty")), nullptr);
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  EXPECT_EQ(MappedFile::map(dir.file("fifo")), nullptr);  // without waiting for a writer
  try {
    MappedFile::map(dir.path());
    ADD_FAILURE() << "a directory was mapped";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(": is a directory, not a file"), std::string::npos);
  }
  try {
    MappedFile::map(dir.file("missing"));
    ADD_FAILURE() << "a missing file was mapped";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("missing") + ": cannot open (No such file or directory)");
  }
}

// `cp` over a file truncates it: the next touch past its new end is SIGBUS,
// which still ends the process, now with the file named.
TEST(MappedFileDeathTest, AFileThatShrinksWhileMappedIsNamedBeforeTheSignal) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer handles SIGBUS itself (AddressSanitizer keeps it from other
  // handlers; ThreadSanitizer's, which ours hands the signal on to, exits
  // with its own status), and the child's report counts as one in ddp's code.
  GTEST_SKIP() << "the sanitizer handles SIGBUS itself";
#endif
  TempDir dir;
  writeAll(dir.file("checkpoint"), std::string(4 * 4096, 'x'));
  const auto mapped = MappedFile::map(dir.file("checkpoint"));
  ASSERT_NE(mapped, nullptr);
  const auto other = MappedFile::map(dir.file("checkpoint"));  // another slot, untouched
  ASSERT_NE(other, nullptr);
  EXPECT_EXIT(
      {
        if (::truncate(dir.file("checkpoint").c_str(), 4096) != 0) std::_Exit(2);  // no SIGBUS
        volatile char past = mapped->bytes()[2 * 4096 + 5];
        (void)past;
      },
      ::testing::KilledBySignal(SIGBUS),
      "error: rank 0: " + dir.file("checkpoint") +
          " shrank while it was being read \\(SIGBUS at byte 8197 of the 16384 it had when "
          "mapped\\): another process truncated or rewrote it in place");
}

}  // namespace
}  // namespace ddp
