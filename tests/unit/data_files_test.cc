// IDX reading and Fashion-MNIST validation: good files load; every bad file is
// a DataError that names the file.
#include <gtest/gtest.h>

#include "runtime/error.h"
#include "test_files.h"
#include "trainer/fashion_mnist.h"
#include "trainer/idx_file.h"
#include "trainer/synthetic_dataset.h"

namespace ddp::trainer {
namespace {

using ddp::testing::concat;
using ddp::testing::idxHeader;
using ddp::testing::TempDir;
using ddp::testing::writeGz;

// Writes a valid split of `count` images whose pixels are (i + p) % 256.
void writeSplit(const TempDir& dir, const std::string& stem, std::uint32_t count,
                std::vector<std::uint8_t> labels = {}) {
  std::vector<std::uint8_t> pixels(count * 784u);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(i % 256);
  if (labels.empty()) {
    for (std::uint32_t i = 0; i < count; ++i)
      labels.push_back(static_cast<std::uint8_t>(i % 10));
  }
  writeGz(dir.file(stem + "-images-idx3-ubyte.gz"), concat(idxHeader({count, 28, 28}), pixels));
  writeGz(dir.file(stem + "-labels-idx1-ubyte.gz"),
          concat(idxHeader({static_cast<std::uint32_t>(labels.size())}), labels));
}

// Expects a DataError whose message contains every one of `parts`.
template <class F>
void expectDataError(F&& load, const std::vector<std::string>& parts) {
  try {
    load();
    FAIL() << "no error";
  } catch (const DataError& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(FashionMnist, LoadsAValidSplitWithPixelsScaledToUnitRange) {
  TempDir dir;
  writeSplit(dir, "t10k", 3);
  auto data = loadFashionMnist(dir.file(""), Split::kTest);
  ASSERT_EQ(data->size(), 3u);
  EXPECT_EQ(data->featureDim(), 784u);
  EXPECT_EQ(data->numClasses(), 10u);
  std::vector<float> x(2 * 784);
  std::int32_t y[2];
  const std::size_t idx[] = {2, 0};
  data->gather(idx, x.data(), y);
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(y[1], 0);
  EXPECT_FLOAT_EQ(x[1], static_cast<float>((2 * 784 + 1) % 256) / 255.0f);
  EXPECT_FLOAT_EQ(x[784 + 255], 1.0f);
  EXPECT_FLOAT_EQ(x[784], 0.0f);
}

TEST(DatasetFingerprint, IsTheCrc32OfTheFeatureBytesThenTheLabels) {
  const std::string check = "123456789";  // CRC-32's standard check value: cbf43926
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(check.data()),
                                            check.size());
  EXPECT_EQ(contentFingerprint(9, bytes, {}), "9 samples, crc32 cbf43926");
  const std::int32_t labels[] = {1};
  EXPECT_NE(contentFingerprint(9, bytes, labels), "9 samples, crc32 cbf43926");
}

TEST(FashionMnist, FingerprintFollowsTheContentNotTheDirectory) {
  TempDir a, b, c;
  writeSplit(a, "t10k", 30);
  writeSplit(b, "t10k", 30);
  std::vector<std::uint8_t> labels;
  for (std::uint8_t i = 0; i < 30; ++i)
    labels.push_back(i % 10);
  labels[17] = 3;  // one label differs
  writeSplit(c, "t10k", 30, labels);
  const std::string fingerprint = loadFashionMnist(a.file(""), Split::kTest)->fingerprint();
  EXPECT_EQ(fingerprint.rfind("30 samples, crc32 ", 0), 0u) << fingerprint;
  EXPECT_EQ(loadFashionMnist(b.file(""), Split::kTest)->fingerprint(), fingerprint);
  EXPECT_NE(loadFashionMnist(c.file(""), Split::kTest)->fingerprint(), fingerprint);
}

TEST(FashionMnist, ReadsUncompressedFilesToo) {
  TempDir dir;
  std::vector<std::uint8_t> pixels(784, 7);
  ddp::testing::writePlain(dir.file("t10k-images-idx3-ubyte"),
                           concat(idxHeader({1, 28, 28}), pixels));
  ddp::testing::writePlain(dir.file("t10k-labels-idx1-ubyte"), concat(idxHeader({1}), {4}));
  EXPECT_EQ(loadFashionMnist(dir.file(""), Split::kTest)->size(), 1u);
}

TEST(FashionMnist, MissingFileIsNamed) {
  TempDir dir;
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"train-images-idx3-ubyte.gz", "cannot open"});
}

TEST(FashionMnist, TruncatedImagesAreNamed) {
  TempDir dir;
  writeSplit(dir, "train", 4);
  std::vector<std::uint8_t> few(3 * 784 + 100, 1);
  writeGz(dir.file("train-images-idx3-ubyte.gz"), concat(idxHeader({4, 28, 28}), few));
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"train-images-idx3-ubyte.gz", "truncated"});
}

TEST(FashionMnist, WrongMagicIsNamed) {
  TempDir dir;
  writeSplit(dir, "train", 2);
  std::vector<std::uint8_t> bytes = concat(idxHeader({2}), {1, 2});
  bytes[2] = 0x0D;  // float elements: not what Fashion-MNIST labels are
  writeGz(dir.file("train-labels-idx1-ubyte.gz"), bytes);
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"train-labels-idx1-ubyte.gz", "bad magic"});
}

TEST(FashionMnist, ImagesInPlaceOfLabelsFailOnDimensions) {
  TempDir dir;
  writeSplit(dir, "train", 2);
  std::filesystem::copy_file(dir.file("train-images-idx3-ubyte.gz"),
                             dir.file("train-labels-idx1-ubyte.gz"),
                             std::filesystem::copy_options::overwrite_existing);
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"train-labels-idx1-ubyte.gz", "bad magic"});
}

TEST(FashionMnist, LabelOutOfRangeIsNamedWithItsIndex) {
  TempDir dir;
  writeSplit(dir, "train", 3, {1, 10, 2});
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"train-labels-idx1-ubyte.gz", "label 10 at index 1", "out of range"});
}

TEST(FashionMnist, CountMismatchBetweenImagesAndLabels) {
  TempDir dir;
  writeSplit(dir, "train", 3, {1, 2});
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); }, {"2 labels", "3 images"});
}

// Valid files of no samples: an epoch would have no step, and the run would
// end "successfully" having trained on nothing.
TEST(FashionMnist, AnEmptySplitIsNamed) {
  TempDir dir;
  writeSplit(dir, "train", 0);
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"train-images-idx3-ubyte.gz", "holds no images"});
}

TEST(FashionMnist, WrongImageSize) {
  TempDir dir;
  writeSplit(dir, "train", 1);
  writeGz(dir.file("train-images-idx3-ubyte.gz"),
          concat(idxHeader({1, 32, 32}), std::vector<std::uint8_t>(1024)));
  expectDataError([&] { loadFashionMnist(dir.file(""), Split::kTrain); },
                  {"32x32", "expected 28x28"});
}

TEST(IdxFile, TrailingDataIsRejected) {
  TempDir dir;
  writeGz(dir.file("x.gz"), concat(idxHeader({2}), {1, 2, 3}));
  expectDataError([&] { readIdxFile(dir.file("x.gz"), 1); }, {"x.gz", "past the 2 elements"});
}

TEST(IdxFile, CorruptCompressedStreamIsRejected) {
  TempDir dir;
  writeGz(dir.file("x.gz"), concat(idxHeader({1000}), std::vector<std::uint8_t>(1000, 5)));
  // Flip bytes in the middle of the deflate stream.
  std::fstream file(dir.file("x.gz"), std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(14);
  file.write("\xff\xff\xff\xff\xff\xff", 6);
  file.close();
  EXPECT_THROW(readIdxFile(dir.file("x.gz"), 1), DataError);
}

// A damaged header that declares 4 GiB over 100 bytes of data: the error
// says how much arrived, and the reader's memory follows what arrived, not
// the header (the peak, reset first, grows by less than 64 MiB).
TEST(IdxFile, AHeaderDeclaringMoreThanTheFileHoldsIsTruncatedWithoutItsMemory) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer's shadow memory grows the peak";
#endif
  TempDir dir;
  writeGz(dir.file("x.gz"), concat(idxHeader({0xFFFFFFFFu}), std::vector<std::uint8_t>(100, 1)));
  if (!ddp::testing::resetResidentPeak())
    GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak here";
  const std::size_t before = ddp::testing::statusBytes("VmRSS:");
  expectDataError([&] { readIdxFile(dir.file("x.gz"), 1); },
                  {"x.gz", "truncated: the data needs 4294967295 bytes, file ends after 100"});
  const std::size_t grown = ddp::testing::statusBytes("VmHWM:") - before;
  EXPECT_LT(grown, std::size_t{64} << 20) << "the peak grew by " << (grown >> 20) << " MiB";
}

// A file larger than the first piece the buffer takes arrives whole.
TEST(IdxFile, DataLargerThanTheFirstPieceIsReadWhole) {
  TempDir dir;
  std::vector<std::uint8_t> bytes(9u << 20);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>((i * 7) >> 3);
  writeGz(dir.file("x.gz"), concat(idxHeader({static_cast<std::uint32_t>(bytes.size())}), bytes));
  const IdxArray read = readIdxFile(dir.file("x.gz"), 1);
  EXPECT_EQ(read.dims, std::vector<std::uint32_t>{static_cast<std::uint32_t>(bytes.size())});
  EXPECT_TRUE(read.data == bytes);
}

TEST(SyntheticDataset, IsDeterministicAndLabelsAreInRange) {
  SyntheticDataset a(100, 8, 3, 5, 0), b(100, 8, 3, 5, 0), test(100, 8, 3, 5, 1);
  std::vector<float> xa(8), xb(8), xt(8);
  std::int32_t ya = 0, yb = 0, yt = 0;
  for (std::size_t i = 0; i < 100; ++i) {
    const std::size_t idx[] = {i};
    a.gather(idx, xa.data(), &ya);
    b.gather(idx, xb.data(), &yb);
    ASSERT_EQ(xa, xb);
    ASSERT_EQ(ya, yb);
    ASSERT_GE(ya, 0);
    ASSERT_LT(ya, 3);
  }
  const std::size_t first[] = {0};
  a.gather(first, xa.data(), &ya);
  test.gather(first, xt.data(), &yt);
  EXPECT_NE(xa, xt);  // the test split holds other samples
}

}  // namespace
}  // namespace ddp::trainer
