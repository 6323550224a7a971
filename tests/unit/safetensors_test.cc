// safetensors: round trip, the byte layout of the format, and every kind of
// bad file rejected with a DataError before anything is loaded.
#include "trainer/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "runtime/error.h"
#include "test_files.h"
#include "trainer/float_formats.h"
#include "trainer/mlp.h"

namespace ddp::trainer {
namespace {

using ddp::testing::statusBytes;
using ddp::testing::TempDir;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The header length a safetensors file's first 8 bytes give (little-endian).
std::uint64_t headerLength(const std::string& bytes) {
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return length;
}

std::string withHeader(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// Note [Weights in other float types]: F16 and BF16 exactly, F64 rounded.
TEST(Safetensors, OtherFloatDtypesAreReadAsFloat32) {
  TempDir dir;
  const auto bytesOf = [](const auto&... values) {
    std::string out;
    (out.append(reinterpret_cast<const char*>(&values), sizeof values), ...);
    return out;
  };
  // F16: 1, -2, 65504 (the largest), 2^-24 (the smallest subnormal), -inf.
  const std::string half =
      bytesOf(std::uint16_t{0x3c00}, std::uint16_t{0xc000}, std::uint16_t{0x7bff},
              std::uint16_t{0x0001}, std::uint16_t{0xfc00});
  const std::string brain = bytesOf(std::uint16_t{0x3f80}, std::uint16_t{0xbf00});  // 1, -0.5
  const std::string wide = bytesOf(0.1, -3.5);
  const std::string header = R"({"a":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[10,14]},)"
                             R"("c":{"dtype":"F64","shape":[2],"data_offsets":[14,30]}})";
  writeAll(dir.file("mixed.safetensors"), withHeader(header, half + brain + wide));
  const SafetensorsFile file = loadSafetensors(dir.file("mixed.safetensors"));
  const float* a = file.tensors.at("a").data();
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[1], -2.0f);
  EXPECT_EQ(a[2], 65504.0f);
  EXPECT_EQ(a[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(a[4], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(file.tensors.at("b").data()[0], 1.0f);
  EXPECT_EQ(file.tensors.at("b").data()[1], -0.5f);
  EXPECT_EQ(file.tensors.at("c").data()[0], 0.1f);
  EXPECT_EQ(file.tensors.at("c").data()[1], -3.5f);
  EXPECT_EQ(file.converted,
            (std::map<std::string, std::size_t>{{"BF16", 1}, {"F16", 1}, {"F64", 1}}));
}

// Every one of the 65536 halves against binary16's definition:
// (-1)^s x 2^(e-15) x 1.m, or 2^-14 x 0.m for e = 0.
TEST(Safetensors, EveryHalfConvertsExactly) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
    const int exponent = static_cast<int>((bits >> 10) & 0x1f);
    const double mantissa = static_cast<double>(bits & 0x3ff) / 1024.0;
    const float got = fromFloat16(static_cast<std::uint16_t>(bits));
    if (exponent == 31) {
      if (mantissa == 0) {
        ASSERT_EQ(got, static_cast<float>(sign * HUGE_VAL)) << bits;
      } else {
        ASSERT_TRUE(std::isnan(got)) << bits;
      }
      continue;
    }
    const double expected = exponent == 0 ? sign * std::ldexp(mantissa, -14)
                                          : sign * std::ldexp(1.0 + mantissa, exponent - 15);
    ASSERT_EQ(got, static_cast<float>(expected)) << bits;
    ASSERT_EQ(std::signbit(got), sign < 0) << bits;
  }
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
  const std::uint64_t length = headerLength(bytes);
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

// Note [Writing a file in parts]: tensors that arrive in pieces (a sharded
// optimizer's state streamed from the ranks), in any order and interleaved
// with other tensors' pieces, make the file saveSafetensors writes, checksums
// included; a tensor with a piece missing is not committed.
TEST(Safetensors, AWriterTakesTensorsInPiecesInAnyOrder) {
  TempDir dir;
  Tensor a({3, 5}), b({7});
  for (std::size_t i = 0; i < a.numel(); ++i)
    a.data()[i] = 0.5f * static_cast<float>(i) - 3.0f;
  for (std::size_t i = 0; i < b.numel(); ++i)
    b.data()[i] = 100.0f + static_cast<float>(i);
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  saveSafetensors(dir.file("whole.safetensors"), {{"a", &a}, {"b", &b}}, meta);
  const auto piece = [](const Tensor& t, std::size_t begin, std::size_t count) {
    return std::span<const float>(t.data() + begin, count);
  };
  {
    SafetensorsWriter writer(dir.file("parts.safetensors"), {{"a", {3, 5}}, {"b", {7}}}, meta);
    writer.writePart(1, 4, piece(b, 4, 3));
    writer.writePart(0, 9, piece(a, 9, 6));
    writer.writePart(1, 0, piece(b, 0, 4));
    writer.writePart(0, 0, piece(a, 0, 2));
    writer.writePart(0, 2, piece(a, 2, 7));
    writer.commit();
  }
  EXPECT_EQ(readAll(dir.file("parts.safetensors")), readAll(dir.file("whole.safetensors")));

  SafetensorsWriter gap(dir.file("gap.safetensors"), {{"a", {3, 5}}, {"b", {7}}}, meta);
  gap.write(0, a.span(), SafetensorsWriter::Checksum::kNow);
  gap.writePart(1, 0, piece(b, 0, 6));
  EXPECT_THROW(gap.writePart(1, 5, piece(b, 5, 2)), InternalError) << "past the tensor's end";
  try {
    gap.commit();
    FAIL() << "a tensor with a piece missing was committed";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'b' not written (6 of 7 elements)"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("gap.safetensors")));
}

TEST(Safetensors, CheckCanSaveLeavesNothingAndRefusesWhatSavingWouldFailOn) {
  TempDir dir;
  ddp::trainer::checkCanSave(dir.file("m.safetensors"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("")));
  const auto refusal = [](const std::string& path) {
    try {
      ddp::trainer::checkCanSave(path);
    } catch (const ddp::DataError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(dir.file("missing/m.safetensors")).find("cannot create (No such file"),
            std::string::npos);
  EXPECT_NE(refusal(dir.file("")).find("it is a directory"), std::string::npos);
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

// Seven Linear layers: layers.0 to layers.12, whose order is numeric, not
// the file's (layers.10 sorts before layers.2 there).
std::string moreLayerBytes() {
  TempDir dir;
  auto model = buildMlp(3, {4, 4, 4, 4, 4, 4}, 2, 1);
  saveModel(dir.file("m"), *model);
  return readAll(dir.file("m"));
}

std::string flipLastByte(std::string bytes) {
  bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
  return bytes;
}

// `bytes` with the one occurrence of `from` replaced by `to` (same length, so
// the header length stays right).
std::string replaced(std::string bytes, const std::string& from, const std::string& to) {
  const std::size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(bytes.find(from, at + 1), std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  return bytes.replace(at, from.size(), to);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsRejects,
    ::testing::Values(
        BadFile{"Empty", "", "shorter than"},
        BadFile{"HeaderLongerThanFile", withHeader("{" + std::string(49, ' '), "").substr(0, 20),
                "truncated: its safetensors header alone is 50 bytes, and the file has 20 bytes"},
        BadFile{"TextFile", "root:x:0:0:root:/root:/bin/bash\n",
                "not a safetensors file (its first 8 bytes, read as the header's length, say "
                "3475222254926655346 bytes; the file has 32 bytes)"},
        BadFile{"TorchSave", std::string("PK\x03\x04\x00\x00\x08\x08\x00\x00", 10),
                "not a safetensors file but a Python pickle in a zip archive, as torch.save "
                "writes"},
        BadFile{"ZipWithoutFlags",  // its first 8 bytes read as a length of 64 MiB
                std::string("PK\x03\x04\x00\x00\x00\x00", 8) + std::string(0x04034b50, 'x'),
                "not a safetensors file but a Python pickle in a zip archive"},
        BadFile{"TorchSaveLegacy",
                std::string("\x80\x02\x8a\x0al\xfc\x9c"
                            "F\xf9 j\xa8",
                            12),
                "not a safetensors file but a Python pickle, as torch.save writes"},
        BadFile{"NotJson", withHeader("{nope", ""), "not valid JSON"},
        BadFile{
            "WrongDtype",
            withHeader(R"({"layers.0.weight":{"dtype":"I64","shape":[2,3],"data_offsets":[0,48]}})",
                       std::string(48, '\0')),
            "has dtype I64; only float tensors are read"},
        BadFile{
            "HalfSizedAsFloat",  // 2 x 3 halves are 12 bytes, not 24
            withHeader(R"({"layers.0.weight":{"dtype":"F16","shape":[2,3],"data_offsets":[0,24]}})",
                       std::string(24, '\0')),
            "does not match its 24 data bytes"},
        BadFile{
            "DoubleBeyondFloat",
            withHeader(R"({"layers.0.weight":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                       std::string("\x00\x00\x00\x00\x00\x00\xf0\x7e", 8)),  // 2^1008
            "holds 2.74306e+303 at index 0, beyond float32's range"},
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
        // Another --hidden: the file's layers and the model's, side by side.
        BadFile{"WrongShapes", goodModelBytes(3, 5, 2),
                "has shape [5] but the model's is [2] (the file holds Linear(3, 5) -> Linear(5, "
                "2); the model is Linear(3, 2) -> ReLU() -> Linear(2, 2))"},
        BadFile{"MoreLayers", moreLayerBytes(),
                "Linear(3, 4) -> Linear(4, 4) -> Linear(4, 4) -> "
                "Linear(4, 4) -> Linear(4, 4) -> Linear(4, 4) -> Linear(4, 2); the model is"},
        BadFile{
            "MissingTensor",  // from another writer: no checksums to catch it first
            withHeader(R"({"layers.0.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                       R"("layers.0.bias":{"dtype":"F32","shape":[2],"data_offsets":[24,32]},)"
                       R"("layers.2.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[32,48]}})",
                       std::string(48, '\0')),
            "has no tensor 'layers.2.bias' (the file holds Linear(3, 2) -> Linear(2, 2); the model "
            "is Linear(3, 2) -> ReLU() -> Linear(2, 2))"},
        BadFile{"RenamedTensor",
                replaced(goodModelBytes(3, 2, 2), "\"layers.2.bias\":{", "\"layers.2.bia_\":{"),
                "damaged: tensor 'layers.2.bia_' has CRC-32"},
        // Note [Checksums in safetensors files]: damage that still parses.
        BadFile{"FlippedDataBit", flipLastByte(goodModelBytes(3, 2, 2)),
                "damaged: tensor 'layers.2.bias' has CRC-32"},
        BadFile{"ChangedMetadataValue", replaced(goodModelBytes(3, 2, 2), "\"ddp\"", "\"dDp\""),
                "damaged: its metadata has CRC-32"},
        BadFile{
            "TensorChecksumRenamed",
            replaced(goodModelBytes(3, 2, 2), "ddp.crc32.layers.0.bias", "ddp.crc32.layers.0.bia_"),
            "damaged: its metadata has CRC-32"},
        BadFile{"MetadataChecksumRenamed",
                replaced(goodModelBytes(3, 2, 2), "ddp.metadata_crc32", "ddp.metadata_crc3_"),
                "but the file recorded none"}),
    [](const auto& info) { return info.param.name; });

TEST(Safetensors, ChecksumsAreZlibCrc32sOfEachTensorAndOfTheMetadata) {
  const std::string bytes = goodModelBytes(3, 2, 4);
  const std::uint64_t length = headerLength(bytes);
  const auto header = nlohmann::json::parse(bytes.substr(8, length));
  const auto& meta = header["__metadata__"];
  const auto hex = [](uLong crc) {
    char text[9];
    std::snprintf(text, sizeof text, "%08lx", crc);
    return std::string(text);
  };
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::size_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
    const auto* data = reinterpret_cast<const Bytef*>(bytes.data() + 8 + length + begin);
    EXPECT_EQ(meta["ddp.crc32." + name], hex(crc32(0, data, end - begin))) << name;
  }
  std::string canonical;  // key NUL value NUL, in key order, all but the metadata checksum
  for (const auto& [key, value] : meta.items()) {
    if (key != "ddp.metadata_crc32") canonical += key + '\0' + value.get<std::string>() + '\0';
  }
  EXPECT_EQ(meta["ddp.metadata_crc32"],
            hex(crc32(0, reinterpret_cast<const Bytef*>(canonical.data()), canonical.size())));
  EXPECT_TRUE(parseSafetensors(std::make_shared<std::string>(bytes), "m").checksummed);
}

TEST(Safetensors, FilesFromOtherWritersNeedNoChecksums) {
  TempDir dir;
  writeAll(
      dir.file("other.safetensors"),
      withHeader(
          R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
          std::string(8, '\0')));
  const SafetensorsFile file = loadSafetensors(dir.file("other.safetensors"));
  EXPECT_FALSE(file.checksummed);
  ASSERT_TRUE(file.tensors.contains("x"));
  EXPECT_EQ(file.tensors.at("x").numel(), 2u);
}

TEST(Safetensors, DataUnalignedForFloatsIsReadCorrectly) {
  // Tensors are views into the file's bytes where the floats are aligned;
  // a header of odd length (other writers do not pad) makes them unaligned.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((4 - (8 + header.size()) % 4) % 4 + 1, ' ');  // 8 + length = 1 mod 4
  const float values[2] = {1.5f, -2.0f};
  TempDir dir;
  writeAll(dir.file("odd.safetensors"),
           withHeader(header, std::string(reinterpret_cast<const char*>(values), 8)));
  const SafetensorsFile file = loadSafetensors(dir.file("odd.safetensors"));
  EXPECT_EQ(file.tensors.at("x").data()[0], 1.5f);
  EXPECT_EQ(file.tensors.at("x").data()[1], -2.0f);
}

// The resident bytes of this process's mapping holding `address`, from
// /proc/self/smaps; nullopt where no mapping holds it.
std::optional<std::size_t> residentBytesOfMappingAt(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0, end = 0;
    // A mapping's first line starts "begin-end"; its fields' lines do not.
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &begin, &end) == 2) {
      inside = begin <= at && at < end;
    } else if (inside && line.starts_with("Rss:")) {
      return std::stoull(line.substr(4)) * 1024;
    }
  }
  return std::nullopt;
}

// Note [Reading files through a mapping]: loadSafetensors maps the file, and
// once checked its tensors' pages are not resident: reading a file costs no
// copy of it. Reading a tensor brings its pages in, release() lets them go
// again, and the values read after that are the file's still.
TEST(Safetensors, ALoadedFileIsMappedAndNotResidentOnceChecked) {
  TempDir dir;
  constexpr std::size_t kCount = std::size_t{4} << 20;  // 16 MiB of floats
  Tensor weights({kCount});
  for (std::size_t i = 0; i < kCount; ++i)
    weights.data()[i] = static_cast<float>(i % 1000) - 500.0f;
  saveSafetensors(dir.file("big.safetensors"), {{"w", &weights}});
  const SafetensorsFile file = loadSafetensors(dir.file("big.safetensors"));
  ASSERT_NE(file.mapping, nullptr);
  EXPECT_TRUE(file.checksummed);  // every page was read to check it
  const Tensor& w = file.tensors.at("w");
  ASSERT_TRUE(file.mapping->contains(w.data(), kCount * sizeof(float)));
  const auto resident = [&] {
    return residentBytesOfMappingAt(w.data()).value_or(~std::size_t{0});
  };
  EXPECT_LT(resident(), std::size_t{64} << 10);

  const std::span<const float> values(w.data(), kCount);
  const auto matches = [&] {
    for (std::size_t i = 0; i < kCount; ++i) {
      if (values[i] != weights.data()[i]) return false;
    }
    return true;
  };
  EXPECT_TRUE(matches());
  EXPECT_GT(resident(), std::size_t{15} << 20);  // read: resident, as the measure shows
  file.release(values.subspan(0, kCount / 2));
  EXPECT_LT(resident(), std::size_t{9} << 20);
  file.release(values);
  EXPECT_LT(resident(), std::size_t{64} << 10);
  EXPECT_TRUE(matches());
  // A tensor converted into memory is not the mapping's: nothing to release.
  const Tensor copy = w.clone();
  file.release(std::span<const float>(copy.data(), kCount));
}

// Loading a model from a file holds one tensor of the file at a time beside
// the model: each tensor's pages go once checksummed and once copied
// (SafetensorsFile::copyInto), so the peak grows by the largest tensor, not
// by the file. The peak (VmHWM) is reset to the resident set first, through
// /proc/self/clear_refs.
TEST(Safetensors, LoadingAModelHoldsOneTensorOfTheFileAtATime) {
#if defined(__SANITIZE_THREAD__)
  // Its shadow of every byte touched counts in the resident set.
  GTEST_SKIP() << "ThreadSanitizer's shadow memory grows the peak";
#endif
  TempDir dir;
  // 14.2 M parameters (57 MiB), the largest tensor 16 MiB.
  auto saved = buildMlp(784, {2048, 2048, 2048, 2048}, 10, 1);
  saveModel(dir.file("m.safetensors"), *saved);
  auto model = buildMlp(784, {2048, 2048, 2048, 2048}, 10, 2);  // resident: initialised
  if (!ddp::testing::resetResidentPeak())
    GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak here";
  const std::size_t before = statusBytes("VmRSS:");
  ASSERT_LE(statusBytes("VmHWM:"), before + (std::size_t{1} << 20));
  loadModel(dir.file("m.safetensors"), *model);
  const std::size_t grown = statusBytes("VmHWM:") - before;
  EXPECT_LT(grown, std::size_t{28} << 20) << "the peak grew by " << (grown >> 20) << " MiB";
  for (std::size_t i = 0; i < model->parameters().size(); ++i) {
    const Tensor& a = model->parameters()[i]->value;
    const Tensor& b = saved->parameters()[i]->value;
    ASSERT_TRUE(std::equal(a.data(), a.data() + a.numel(), b.data())) << i;
  }
}

// Metadata numbers: a count is digits alone (std::stoull would take "-1"
// and wrap it round to 2^64 - 1); a real reads back what %.17g wrote; a
// missing or malformed entry is refused naming the file and the entry.
TEST(Safetensors, MetadataCountsAndRealsAreReadWholeOrRefused) {
  const std::map<std::string, std::string> metadata = {{"count", "42"},
                                                       {"negative", "-1"},
                                                       {"signed", "+3"},
                                                       {"trailing", "7x"},
                                                       {"real", "0.30000000000000004"},
                                                       {"nan", "nan"},
                                                       {"empty", ""}};
  EXPECT_EQ(metadataCount("f", metadata, "count"), 42u);
  EXPECT_EQ(metadataReal("f", metadata, "real"), 0.1 + 0.2);
  EXPECT_TRUE(std::isnan(metadataReal("f", metadata, "nan")));
  for (const char* key : {"negative", "signed", "trailing", "empty", "real"}) {
    try {
      metadataCount("f", metadata, key);
      ADD_FAILURE() << key << " read as a count";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("f: metadata entry '") + key +
                                           "' is malformed: '" + metadata.at(key) + "'");
    }
  }
  EXPECT_THROW(metadataReal("f", metadata, "trailing"), DataError);
  try {
    metadataCount("f", metadata, "absent");
    ADD_FAILURE() << "read a missing entry";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "f: metadata entry 'absent' is missing");
  }
}

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

// `--init-from` a FIFO waited in open() for a writer that never came, and a
// device read as an empty file: what is not a regular file is named.
TEST(Safetensors, WhatIsNotARegularFileIsRefusedAtOnceAndNamed) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  auto model = buildMlp(3, {2}, 2, 1);
  for (const auto& [path, kind] :
       {std::pair<std::string, std::string>{dir.file("fifo"), "a pipe or FIFO"},
        {"/dev/zero", "a character device"},
        {dir.path(), "is a directory"}}) {
    try {
      loadModel(path, *model);
      FAIL() << path;
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(kind), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ddp::trainer
