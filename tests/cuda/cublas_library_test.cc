// cuBLAS is opened when a GPU run first needs it, not linked (Note [cuBLAS
// opened on first use]). Opening it and looking up its calls needs no GPU,
// so this runs on any machine of a CUDA build.
#include "runtime/cuda/cublas_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace ddp::cuda {
namespace {

// Whether a file whose name contains `name` is mapped into this process.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

// This process's address space in use (VmSize), 0 when unreadable.
std::size_t vmSizeBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  return 0;
}

// Taken before main, so before any test could have opened it.
const bool kMappedAtStart = mapped("libcublas");

std::string messageOf(const std::string& fileName, const std::vector<std::string>& folders) {
  try {
    openCublas(fileName, folders);
  } catch (const DeviceError& e) {
    return e.what();
  }
  ADD_FAILURE() << "opening " << fileName << " did not throw";
  return "";
}

TEST(CublasLibrary, OpenedOnlyWhenFirstAskedFor) {
  // At start, a process of a CUDA build has not loaded cuBLAS (nor cuBLASLt).
  EXPECT_FALSE(kMappedAtStart) << "cuBLAS was mapped before anything asked for it";
  const CublasLibrary& library = cublas();
  EXPECT_TRUE(mapped(cublasFileName()));
  EXPECT_EQ(cublasFileName(), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  for (const void* call :
       {reinterpret_cast<const void*>(library.create), reinterpret_cast<const void*>(library.sgemm),
        reinterpret_cast<const void*>(library.sgemv),
        reinterpret_cast<const void*>(library.setStream),
        reinterpret_cast<const void*>(library.setMathMode),
        reinterpret_cast<const void*>(library.getStatusString),
        reinterpret_cast<const void*>(library.getProperty)})
    EXPECT_NE(call, nullptr);
  EXPECT_STREQ(library.getStatusString(CUBLAS_STATUS_SUCCESS), "success");
  EXPECT_EQ(&cublas(), &library);  // opened once
  // The file as the loader found it: a path, for --version.
  EXPECT_EQ(library.file.rfind('/', 0), 0u) << library.file;
  EXPECT_NE(library.file.find("libcublas.so"), std::string::npos) << library.file;
  int major = 0;
  EXPECT_EQ(library.getProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  EXPECT_EQ(cublasDescription().rfind(std::to_string(CUBLAS_VER_MAJOR) + ".", 0), 0u)
      << cublasDescription();
}

TEST(CublasLibrary, ACublasErrorNamesTheCallAndCublasMessage) {
  try {
    DDP_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED);
    FAIL() << "expected a DeviceError";
  } catch (const DeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("CUBLAS_STATUS_NOT_INITIALIZED failed on rank"), std::string::npos)
        << message;
    EXPECT_NE(message.find("cublas_library_test.cc:"), std::string::npos) << message;
    EXPECT_NE(message.find(": the library was not initialized (cuBLAS status 1)"),
              std::string::npos)
        << message;
  }
}

TEST(CublasLibrary, AMissingLibraryNamesEveryPlaceTried) {
  const std::string message = messageOf("libcublas.so.999", {"/no-such-a", "/no-such-b"});
  EXPECT_NE(message.find("cannot open cuBLAS, which a GPU run needs"), std::string::npos)
      << message;
  EXPECT_NE(message.find("libcublas.so.999: "), std::string::npos) << message;
  EXPECT_NE(message.find("/no-such-a/libcublas.so.999"), std::string::npos) << message;
  EXPECT_NE(message.find("/no-such-b/libcublas.so.999"), std::string::npos) << message;
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos) << message;
}

// Opens cuBLAS with room for much, but not for its 670 MiB of mappings, and
// exits 3 with the error on stderr (2: the limit could not be set).
[[noreturn]] void openUnderATightLimit() {
  const std::size_t used = vmSizeBytes(), allowed = used + (std::size_t{200} << 20);
  const rlimit tight{allowed, allowed};
  if (used == 0 || setrlimit(RLIMIT_AS, &tight) != 0) std::_Exit(2);
  try {
    openCublas(cublasFileName(), {});
  } catch (const DeviceError& e) {
    std::fputs(e.what(), stderr);
    std::_Exit(3);
  }
  std::_Exit(0);
}

TEST(CublasLibrary, AnAddressSpaceLimitTooTightForItIsNamed) {
  // A process of its own (run afresh, not forked), so cuBLAS is not open yet.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      openUnderATightLimit(), ::testing::ExitedWithCode(3),
      "cannot open cuBLAS.*ulimit -v limits this process's address space to .*, and .* of it "
      "is left: cuBLAS maps about 670 MiB of address space, raise the limit");
}

TEST(CublasLibrary, ALibraryWithoutCublasCallsIsNamed) {
  // zlib is there (ddp links it) and has none of cuBLAS's calls.
  const std::string message = messageOf("libz.so.1", {});
  EXPECT_NE(message.find("cuBLAS: libz.so.1 has no cublasCreate_v2"), std::string::npos) << message;
  EXPECT_NE(message.find("not the cuBLAS " + std::to_string(CUBLAS_VER_MAJOR)), std::string::npos)
      << message;
}

TEST(CublasLibrary, FoundInAToolkitFolderWhereTheLoaderDoesNotLook) {
  // A name only a folder of ours has: a link to the cuBLAS cublas() opened.
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<const void*>(cublas().create), &info), 0);
  char folder[] = "/tmp/ddp-cublas-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string name = "libddp-test-cublas.so";
  std::filesystem::create_symlink(std::filesystem::canonical(info.dli_fname),
                                  std::string(folder) + "/" + name);
  const std::vector<std::string> folders = {"/no-such-a", folder};
  const CublasLibrary library = openCublas(name, folders);
  // The same file as cublas()'s, which the loader recognises as open already.
  EXPECT_EQ(library.file, cublas().file);
  EXPECT_STREQ(library.getStatusString(CUBLAS_STATUS_NOT_SUPPORTED),
               "the requested functionality is not supported");
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace ddp::cuda
