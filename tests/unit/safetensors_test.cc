// safetensors: round trip, the byte layout of the format, and every kind of
// bad file rejected with a DataError before anything is loaded.
#include "trainer/safetensors.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "test_files.h"
#include "trainer/mlp.h"

namespace ddp::trainer {
namespace {

using ddp::testing::TempDir;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string withHeader(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(Safetensors, ModelRoundTripIsExact) {
  TempDir dir;
  auto a = buildMlp(6, {5, 4}, 3, 1);
  auto b = buildMlp(6, {5, 4}, 3, 99);
  saveModel(dir.file("m.safetensors"), *a);
  loadModel(dir.file("m.safetensors"), *b);
  auto pa = a->parameters(), pb = b->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i]->name, pb[i]->name);
    for (std::size_t j = 0; j < pa[i]->value.numel(); ++j)
      ASSERT_EQ(pa[i]->value.data()[j], pb[i]->value.data()[j]);
  }
}

TEST(Safetensors, LayoutFollowsTheFormatWithPytorchNamesAndShapes) {
  TempDir dir;
  auto model = buildMlp(3, {2}, 4, 1);
  saveModel(dir.file("m.safetensors"), *model);
  const std::string bytes = readAll(dir.file("m.safetensors"));
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  EXPECT_EQ(length % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, length));
  EXPECT_EQ(header["layers.0.weight"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(header["layers.0.bias"]["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(header["layers.2.weight"]["shape"], nlohmann::json::array({4, 2}));
  EXPECT_EQ(header["layers.2.weight"]["dtype"], "F32");
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  const std::uint64_t dataBytes = (6 + 2 + 8 + 4) * 4;
  EXPECT_EQ(bytes.size(), 8 + length + dataBytes);
  // The first weight's floats are at its offsets, little-endian.
  const auto offsets = header["layers.0.weight"]["data_offsets"];
  float first = 0;
  std::memcpy(&first, bytes.data() + 8 + length + offsets[0].get<std::size_t>(), 4);
  EXPECT_EQ(first, model->parameters()[0]->value.data()[0]);
}

TEST(Safetensors, SavingLeavesNoTemporaryFiles) {
  TempDir dir;
  auto model = buildMlp(3, {2}, 2, 1);
  saveModel(dir.file("m.safetensors"), *model);
  saveModel(dir.file("m.safetensors"), *model);  // over an existing file
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(""))) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

struct BadFile {
  std::string name;
  std::string bytes;
  std::string message;
};

class SafetensorsRejects : public ::testing::TestWithParam<BadFile> {};

TEST_P(SafetensorsRejects, WithAMessageAndWithoutTouchingTheModel) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  writeAll(path, GetParam().bytes);
  auto model = buildMlp(3, {2}, 2, 1);
  const float before = model->parameters()[0]->value.data()[0];
  try {
    loadModel(path, *model);
    FAIL() << "accepted a bad file";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model->parameters()[0]->value.data()[0], before);
}

std::string goodModelBytes(std::size_t in, std::size_t hidden, std::size_t out) {
  TempDir dir;
  auto model = buildMlp(in, {hidden}, out, 1);
  saveModel(dir.file("m"), *model);
  return readAll(dir.file("m"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsRejects,
    ::testing::Values(
        BadFile{"Empty", "", "shorter than"},
        BadFile{"HeaderLongerThanFile", withHeader(std::string(50, ' '), "").substr(0, 20),
                "header length"},
        BadFile{"NotJson", withHeader("{nope", ""), "not valid JSON"},
        BadFile{
            "WrongDtype",
            withHeader(R"({"layers.0.weight":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})",
                       std::string(12, '\0')),
            "only F32"},
        BadFile{"OffsetsPastEnd",
                withHeader(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                           std::string(8, '\0')),
                "truncated"},
        BadFile{"ShapeDisagreesWithOffsets",
                withHeader(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                           std::string(8, '\0')),
                "does not match"},
        BadFile{"Truncated", goodModelBytes(3, 2, 2).substr(0, goodModelBytes(3, 2, 2).size() - 4),
                "truncated"},
        BadFile{"WrongShapes", goodModelBytes(3, 5, 2), "has shape"},
        BadFile{"MissingTensor",
                goodModelBytes(3, 2, 2).replace(goodModelBytes(3, 2, 2).find("layers.2.bias"), 13,
                                                "layers.2.bia_"),
                "has no tensor 'layers.2.bias'"}),
    [](const auto& info) { return info.param.name; });

TEST(Safetensors, ExtraTensorIsRejected) {
  TempDir dir;
  auto big = buildMlp(3, {2, 2}, 2, 1);
  saveModel(dir.file("m"), *big);
  auto small = buildMlp(3, {2}, 2, 1);
  // layers.2 has shape [2, 2] in both; small has no layers.4.
  try {
    loadModel(dir.file("m"), *small);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("layers."), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp::trainer
