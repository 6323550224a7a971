// Weights in the safetensors format (https://huggingface.co/docs/safetensors):
// an 8-byte little-endian header length, a JSON header mapping each tensor
// name to {dtype, shape, data_offsets}, then the raw little-endian data.
// Python's `safetensors.torch.load_file` reads what we write, and we read
// theirs (float32 tensors).
//
// Note [Checksums in safetensors files]
// The format has no checksum, so a flipped bit in a tensor's data (a failing
// disk, a bad copy) loads as a slightly wrong weight, silently; a flipped
// digit in the metadata moves a resumed run to another position. Every file
// ddp writes therefore carries CRC-32s (zlib's, the same as Python's
// zlib.crc32) as metadata, which other readers ignore:
//   * `ddp.crc32.<tensor name>`: of that tensor's data bytes;
//   * `ddp.metadata_crc32`: of every other metadata entry, in byte order of
//     the keys, each as key, NUL, value, NUL (the tensor checksums included).
// Both are 8 lowercase hex digits. The reader checks whatever checksums a
// file has, and a file with any has them all, so a damaged file is refused
// naming the tensor or the metadata, before anything is loaded. Files from
// other writers have none and load as before; checkpoints must have them.
// What it costs (benchmarks/checkpoint_bench.cc, in benchmarks/RESULTS.md):
// 7% of writing the default MLP's checkpoint, 7-28% of the large one's
// (0.07-0.3 s of 1.0-1.1 s, as this VM's memory bandwidth varies).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/mapped_file.h"
#include "trainer/sequential.h"
#include "trainer/tensor.h"

namespace ddp::trainer {

struct SafetensorsFile {
  // The tensors. Read by loadSafetensors, the F32 ones are views into the
  // file's mapping (Note [Reading files through a mapping] in
  // runtime/mapped_file.h): after the checksums their pages are no longer
  // resident, and touching them reads them again.
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
  // Whether the file carried checksums and they all matched (Note [Checksums
  // in safetensors files]); false for a file from another writer.
  bool checksummed = false;
  // Tensors read from another float dtype into float32, by dtype (Note
  // [Weights in other float types] in trainer/float_formats.h).
  std::map<std::string, std::size_t> converted;
  // The file's mapping, or null for a file read into memory (a pipe, bytes
  // sent over MPI).
  std::shared_ptr<const MappedFile> mapping;

  // Drops the resident pages behind `values`, part of one of `tensors`,
  // once the caller has read them (restoreCheckpointFromRoot, piece by
  // piece): with a mapping they are read again from the file if touched;
  // otherwise, or for a tensor converted into memory, nothing happens. The
  // caller must not have written into them.
  void release(std::span<const float> values) const;
  // Copies tensor `name` into `target` (same count, on any device), then
  // releases the tensor's pages: what loading a file into a model does, so
  // that the file's pages are never all resident beside the model's.
  void copyInto(const std::string& name, Tensor& target) const;
};

// Writes atomically: a temporary file next to `path`, fsynced, then renamed
// over `path` (and the directory fsynced), so a crash never leaves a partial
// file under `path`. Tensors may be on any device (copied to the host
// first). Adds the checksums (Note [Checksums in safetensors
// files]) to `metadata`, whose keys must not start with "ddp.crc32." or be
// "ddp.metadata_crc32". Throws DataError if it cannot write.
void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

// Note [Writing a file in parts]
// saveSafetensors writes the header first, so it must have every tensor's
// checksum before its first data byte goes out. A writer that fixes the
// layout instead (names, shapes, hence every tensor's place in the file,
// with the checksums' places in the header: 8 hex digits each) can write
// the tensors' bytes in any order and at different times, and the header
// last. CheckpointWriter's direct mode needs that: between two steps the
// training thread writes the tensors into the file (the page cache), and
// the writer thread checksums them later, reading them back from the file,
// so no copy of them is ever held in memory (Note [Checkpoints written in
// the background] in trainer/checkpoint_writer.h). The file is the same,
// byte for byte, as saveSafetensors's.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    Shape shape;  // F32
  };
  // When a tensor's checksum is computed: from the values as they are
  // written (they are in cache), or by commit(), from the file.
  enum class Checksum { kNow, kAtCommit };

  // Creates the temporary file next to `path` (as saveSafetensors) for
  // `entries`, in this order, and `metadata` (whose keys saveSafetensors
  // reserves are refused). Throws DataError if it cannot create it.
  SafetensorsWriter(std::string path, std::vector<Entry> entries,
                    std::map<std::string, std::string> metadata);
  // Closes the temporary file and, unless commit() succeeded, removes it.
  // Never throws.
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Writes entry `index`'s values (host memory, as many floats as its
  // shape holds) to its place. One thread at a time; the values may change
  // once it returns. Throws DataError if the write fails (a full disk:
  // with the sizes), leaving the temporary file for the destructor.
  void write(std::size_t index, std::span<const float> values, Checksum checksum);
  // Writes `values` as entry `index`'s elements [begin, begin +
  // values.size()): a tensor that arrives in pieces (a sharded optimizer's
  // state, gathered piece by piece: ShardedOptimizer::streamState). The
  // pieces may come in any order and must cover the entry once; commit()
  // checksums it from the file. Otherwise as write().
  void writePart(std::size_t index, std::size_t begin, std::span<const float> values);
  // Once every entry is written: checksums those written kAtCommit, reading
  // them back, writes the header, fsyncs, renames over the path and fsyncs
  // the directory. Throws DataError if it cannot.
  void commit();

  const std::string& path() const { return path_; }
  std::size_t size() const { return entries_.size(); }

 private:
  std::string header(const std::vector<std::string>& crcs) const;
  [[noreturn]] void fail(const char* what, int error) const;

  std::string path_;
  std::string temporary_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::uint64_t> offsets_;  // of each entry's data, from the file's start
  std::uint64_t fileSize_ = 0;
  std::optional<std::uint64_t> freeBefore_;  // for a full disk's message
  std::vector<std::string> crcs_;            // 8 hex digits each, "" until known
  std::vector<std::uint64_t> written_;       // elements of each entry
  int fd_ = -1;
  bool committed_ = false;
};

// Throws DataError unless saveSafetensors(path, ...) could create its
// temporary file now: creates that file and removes it, and refuses a
// `path` that is a directory. For checking an output path before a run
// whose end writes it.
void checkCanSave(const std::string& path);

// The whole file, in one read. Throws DataError if it cannot, or if `path`
// is not a regular file (a pipe, a FIFO, a device: named as such).
std::string readWholeFile(const std::string& path);

// Reads and validates the whole file: header length, JSON, F32 dtype, shapes
// matching data_offsets, offsets inside the file and not overlapping, and
// the checksums if it has any. Throws DataError naming the file and the
// problem (and the tensor, for a damaged one). A regular file is mapped, not
// copied (Note [Reading files through a mapping]); anything else is read.
SafetensorsFile loadSafetensors(const std::string& path);
// The same for a whole file already in memory (a file read elsewhere and
// sent over MPI); `name` stands for the file in errors. The tensors are
// views into `bytes`, which they keep alive (copies where the file leaves a
// tensor's data unaligned for floats).
SafetensorsFile parseSafetensors(std::shared_ptr<std::string> bytes, const std::string& name);

// Entry `key` of a file's `metadata` (read from `path`) as a count (digits
// alone: no sign, nothing after them) or as a real number (std::stod's
// forms, nan and inf included). Throws DataError naming `path` and `key`
// when it is missing or malformed.
std::size_t metadataCount(const std::string& path,
                          const std::map<std::string, std::string>& metadata,
                          const std::string& key);
double metadataReal(const std::string& path, const std::map<std::string, std::string>& metadata,
                    const std::string& key);

// Checks that `file` (read from `path`) holds every parameter of `model`
// under its name with its shape, and nothing else except, optionally,
// tensors whose names start with `otherPrefix` (a checkpoint's optimizer
// state, which the caller checks or ignores). Throws DataError naming the
// file and the first problem.
void checkHoldsModel(const std::string& path, const SafetensorsFile& file, Sequential& model,
                     const std::string& otherPrefix = "");

// The model's parameters, saved under their PyTorch names, with `metadata`
// (Note [Where a model file's weights came from] in trainer/model_origin.h).
void saveModel(const std::string& path, Sequential& model,
               const std::map<std::string, std::string>& metadata = {});
// The same for weights held elsewhere (a checkpoint's, read from its file):
// `tensors` by their PyTorch names.
void saveModelTensors(const std::string& path,
                      const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Loads every parameter of `model` from `path`: names, count and shapes must
// match exactly (no silent partial load). Throws DataError.
void loadModel(const std::string& path, Sequential& model);

}  // namespace ddp::trainer
