//===- SafetensorsTest.cpp - safetensors reader and writer tests ----------===//
//
// A round trip of every dtype, then one test per kind of corruption: each
// must be rejected by SafetensorsReader::open with a message naming it.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "gtest/gtest.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace memopt::driver;

namespace {

class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::filesystem::path(::testing::TempDir()) /
          ("memopt-safetensors-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::string path(const std::string &name) const {
    return (dir / name).string();
  }

  /// Writes raw bytes to `name` and returns its path.
  std::string writeRaw(const std::string &name, const std::string &bytes) {
    std::string file = path(name);
    std::ofstream(file, std::ios::binary) << bytes;
    return file;
  }

  /// A file with `header` prefixed by `headerLength` (the header's size by
  /// default) and `dataBytes` zero bytes of data.
  std::string writeFile(const std::string &header, size_t dataBytes,
                        uint64_t headerLength = UINT64_MAX) {
    if (headerLength == UINT64_MAX)
      headerLength = header.size();
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[i] = static_cast<char>(headerLength >> (8 * i));
    bytes += header;
    bytes.append(dataBytes, '\0');
    return writeRaw("file.safetensors", bytes);
  }

  /// Opens `file` and expects it to fail with a message containing `what`.
  void expectError(const std::string &file, const std::string &what) {
    SafetensorsReader reader;
    std::string error;
    EXPECT_FALSE(reader.open(file, error));
    EXPECT_NE(error.find(what), std::string::npos)
        << "error: '" << error << "', expected to contain '" << what << "'";
  }

  std::filesystem::path dir;
};

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  float f32[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e30f};
  uint16_t f16[2] = {0x3c00, 0xc000};
  uint16_t bf16[3] = {0x3f80, 0x4000, 0x7fc0};
  int64_t i64 = -42;
  int32_t i32[4] = {7, -8, 9, 2147483647};
  uint8_t boolean[2] = {1, 0};
  std::vector<SafetensorsTensorRef> tensors = {
      {"w", TensorDtype::F32, {2, 3}, f32},
      {"half", TensorDtype::F16, {2}, f16},
      {"brain", TensorDtype::BF16, {3, 1}, bf16},
      {"optimizer.step", TensorDtype::I64, {}, &i64},
      {"labels", TensorDtype::I32, {4}, i32},
      {"mask", TensorDtype::Bool, {1, 2}, boolean},
      {"empty", TensorDtype::F32, {0, 5}, nullptr},
  };
  std::string error;
  ASSERT_TRUE(writeSafetensors(path("out.safetensors"), tensors,
                               {{"format", "pt"}}, error))
      << error;
  // Only the final file remains: the temporary was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);

  SafetensorsReader reader;
  ASSERT_TRUE(reader.open(path("out.safetensors"), error)) << error;
  EXPECT_EQ(reader.getMetadata().at("format"), "pt");
  EXPECT_EQ(reader.getEntries().size(), tensors.size());
  for (const SafetensorsTensorRef &tensor : tensors) {
    const SafetensorsEntry *entry = reader.lookup(tensor.name);
    ASSERT_NE(entry, nullptr) << tensor.name;
    EXPECT_EQ(entry->dtype, tensor.dtype) << tensor.name;
    EXPECT_EQ(entry->shape, tensor.shape) << tensor.name;
    std::vector<unsigned char> data(entry->byteSize());
    ASSERT_TRUE(reader.readData(*entry, data.data(), error)) << error;
    if (!data.empty()) {
      EXPECT_EQ(std::memcmp(data.data(), tensor.data, data.size()), 0)
          << tensor.name;
    }
  }
  EXPECT_EQ(reader.lookup("missing"), nullptr);
}

TEST_F(SafetensorsTest, HeaderIsPaddedToEightBytes) {
  float value = 1.0f;
  std::string error;
  ASSERT_TRUE(writeSafetensors(path("out.safetensors"),
                               {{"a", TensorDtype::F32, {}, &value}}, {},
                               error));
  std::ifstream in(path("out.safetensors"), std::ios::binary);
  unsigned char prefix[8];
  in.read(reinterpret_cast<char *>(prefix), 8);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | prefix[i];
  EXPECT_EQ(length % 8, 0u);
  EXPECT_EQ(std::filesystem::file_size(path("out.safetensors")),
            8 + length + 4);
}

TEST_F(SafetensorsTest, OverwritesAtomically) {
  float a = 1.0f, b = 2.0f;
  std::string error;
  ASSERT_TRUE(writeSafetensors(path("out.safetensors"),
                               {{"a", TensorDtype::F32, {}, &a}}, {}, error));
  ASSERT_TRUE(writeSafetensors(path("out.safetensors"),
                               {{"b", TensorDtype::F32, {}, &b}}, {}, error));
  SafetensorsReader reader;
  ASSERT_TRUE(reader.open(path("out.safetensors"), error)) << error;
  EXPECT_EQ(reader.lookup("a"), nullptr);
  ASSERT_NE(reader.lookup("b"), nullptr);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float value = 0;
  std::string error;
  EXPECT_FALSE(writeSafetensors(path("out.safetensors"),
                                {{"a", TensorDtype::F32, {}, &value},
                                 {"a", TensorDtype::F32, {}, &value}},
                                {}, error));
  EXPECT_EQ(error, "tensor 'a' is written twice");
  EXPECT_FALSE(writeSafetensors(
      path("out.safetensors"), {{"__metadata__", TensorDtype::F32, {}, &value}},
      {}, error));
  EXPECT_FALSE(writeSafetensors(path("out.safetensors"),
                                {{"a", TensorDtype::F32, {2}, nullptr}}, {},
                                error));
  EXPECT_EQ(error, "tensor 'a' has no data");
  EXPECT_FALSE(writeSafetensors(path("no/such/dir/out.safetensors"),
                                {{"a", TensorDtype::F32, {}, &value}}, {},
                                error));
  EXPECT_NE(error.find("No such file or directory"), std::string::npos)
      << error;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST_F(SafetensorsTest, AcceptsPaddedHeaderAndMetadata) {
  std::string header = R"({"__metadata__": {"format": "pt"},)"
                       R"( "a": {"dtype": "F32", "shape": [2],)"
                       R"( "data_offsets": [0, 8]}})";
  header.append(5, ' ');
  SafetensorsReader reader;
  std::string error;
  ASSERT_TRUE(reader.open(writeFile(header, 8), error)) << error;
  ASSERT_NE(reader.lookup("a"), nullptr);
}

TEST_F(SafetensorsTest, MissingFile) {
  expectError(path("missing.safetensors"), "No such file or directory");
}

TEST_F(SafetensorsTest, Directory) {
  expectError(dir.string(), "not a regular file");
}

TEST_F(SafetensorsTest, TooShortForLength) {
  expectError(writeRaw("short.safetensors", "abc"), "too short (3 bytes)");
}

TEST_F(SafetensorsTest, ZeroHeaderLength) {
  expectError(writeFile("", 16, 0), "header length is 0");
}

TEST_F(SafetensorsTest, HeaderPastEndOfFile) {
  expectError(writeFile("{}", 0, 1000),
              "header length 1000 exceeds the 2 bytes after the length "
              "prefix");
}

TEST_F(SafetensorsTest, HugeHeaderLength) {
  expectError(writeFile("{}", 0, UINT64_MAX - 1), "exceeds the");
}

TEST_F(SafetensorsTest, InvalidJson) {
  expectError(writeFile(R"({"a": {"dtype": )", 0), "invalid JSON header");
}

TEST_F(SafetensorsTest, HeaderNotAnObject) {
  expectError(writeFile("[1, 2]", 0), "header is not a JSON object");
}

TEST_F(SafetensorsTest, EntryNotAnObject) {
  expectError(writeFile(R"({"a": 3})", 0), "tensor 'a': expected an object");
}

TEST_F(SafetensorsTest, MissingDtype) {
  expectError(writeFile(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4),
              "tensor 'a': missing or non-string 'dtype'");
}

TEST_F(SafetensorsTest, UnknownDtype) {
  expectError(writeFile(R"({"a": {"dtype": "F64", "shape": [1],)"
                        R"( "data_offsets": [0, 8]}})",
                        8),
              "tensor 'a': unsupported dtype 'F64'");
}

TEST_F(SafetensorsTest, NegativeDimension) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [-1],)"
                        R"( "data_offsets": [0, 4]}})",
                        4),
              "has a dimension that is not a non-negative integer");
}

TEST_F(SafetensorsTest, FractionalDimension) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [1.5],)"
                        R"( "data_offsets": [0, 4]}})",
                        4),
              "has a dimension that is not a non-negative integer");
}

TEST_F(SafetensorsTest, OverflowingShape) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": )"
                        R"([4294967296, 4294967296], "data_offsets": [0, 4]}})",
                        4),
              "is too large");
}

TEST_F(SafetensorsTest, OffsetsNotAPair) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [1],)"
                        R"( "data_offsets": [0]}})",
                        4),
              "'data_offsets' must be two non-negative integers");
}

TEST_F(SafetensorsTest, ReversedOffsets) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [1],)"
                        R"( "data_offsets": [4, 0]}})",
                        4),
              "data_offsets [4, 0] are reversed");
}

TEST_F(SafetensorsTest, OffsetsPastData) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [2],)"
                        R"( "data_offsets": [0, 8]}})",
                        4),
              "lie outside the data section of 4 bytes");
}

TEST_F(SafetensorsTest, SizeDoesNotMatchShape) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [3],)"
                        R"( "data_offsets": [0, 8]}})",
                        12),
              "hold 8 bytes, but F32 [3] needs 12");
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [2],)"
                        R"( "data_offsets": [0, 8]},)"
                        R"( "b": {"dtype": "F32", "shape": [2],)"
                        R"( "data_offsets": [4, 12]}})",
                        12),
              "tensors 'a' and 'b' overlap");
}

TEST_F(SafetensorsTest, DuplicateNames) {
  expectError(writeFile(R"({"a": {"dtype": "F32", "shape": [1],)"
                        R"( "data_offsets": [0, 4]},)"
                        R"( "a": {"dtype": "F32", "shape": [1],)"
                        R"( "data_offsets": [4, 8]}})",
                        8),
              "header names 'a' twice");
}

TEST_F(SafetensorsTest, NonStringMetadata) {
  expectError(writeFile(R"({"__metadata__": {"epoch": 3}})", 0),
              "'__metadata__' value of 'epoch' is not a string");
}

TEST_F(SafetensorsTest, TruncatedDataIsCaughtByOffsets) {
  // A file cut short after a valid header: the last tensor's offsets now lie
  // past the end.
  expectError(writeFile(R"({"a": {"dtype": "I64", "shape": [2],)"
                        R"( "data_offsets": [0, 16]}})",
                        9),
              "lie outside the data section of 9 bytes");
}

TEST_F(SafetensorsTest, SurvivesEveryOneByteCorruption) {
  // Each byte of a small valid file replaced by a few troublesome values:
  // open either succeeds (and every tensor reads back) or reports an error.
  float weights[3] = {1, 2, 3};
  int64_t step = 7;
  std::string error;
  std::string valid = path("valid.safetensors");
  ASSERT_TRUE(writeSafetensors(valid,
                               {{"w", TensorDtype::F32, {3}, weights},
                                {"step", TensorDtype::I64, {}, &step}},
                               {{"k", "v"}}, error));
  std::ifstream in(valid, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  const char replacements[] = {'\0', '\xff', '"', '{', '9', ']', '-'};
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (char replacement : replacements) {
      std::string corrupt = bytes;
      corrupt[i] = replacement;
      SafetensorsReader reader;
      if (!reader.open(writeRaw("corrupt.safetensors", corrupt), error)) {
        EXPECT_FALSE(error.empty());
        continue;
      }
      for (const SafetensorsEntry &entry : reader.getEntries()) {
        std::vector<unsigned char> data(entry.byteSize());
        EXPECT_TRUE(reader.readData(entry, data.data(), error)) << error;
      }
    }
  }
  // Every truncation too.
  for (size_t size = 0; size < bytes.size(); ++size) {
    SafetensorsReader reader;
    EXPECT_FALSE(reader.open(
        writeRaw("truncated.safetensors", bytes.substr(0, size)), error))
        << size;
  }
}

} // namespace
