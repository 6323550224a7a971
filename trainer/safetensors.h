// Weights in the safetensors format (https://huggingface.co/docs/safetensors):
// an 8-byte little-endian header length, a JSON header mapping each tensor
// name to {dtype, shape, data_offsets}, then the raw little-endian data.
// Python's `safetensors.torch.load_file` reads what we write, and we read
// theirs (float32 tensors).
#pragma once

#include <istream>
#include <map>
#include <string>
#include <vector>

#include "trainer/sequential.h"
#include "trainer/tensor.h"

namespace ddp::trainer {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
};

// Writes atomically: a temporary file next to `path`, fsynced, then renamed
// over `path` (and the directory fsynced), so a crash never leaves a partial
// file under `path`. Throws DataError if it cannot write.
void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

// Reads and validates the whole file: header length, JSON, F32 dtype, shapes
// matching data_offsets, offsets inside the file and not overlapping.
// Throws DataError naming the file and the problem.
SafetensorsFile loadSafetensors(const std::string& path);
// The same from a stream holding a whole file (a file read elsewhere and
// sent over MPI); `name` stands for the file in errors.
SafetensorsFile readSafetensors(std::istream& in, const std::string& name);

// Checks that `file` (read from `path`) holds every parameter of `model`
// under its name with its shape, and nothing else except, optionally,
// `extraPrefix` + a parameter's name with that parameter's shape. Throws
// DataError naming the file and the first problem.
void checkHoldsModel(const std::string& path, const SafetensorsFile& file, Sequential& model,
                     const std::string& extraPrefix = "");

// The model's parameters under their PyTorch names, in host memory (copies
// of parameters on a device), for saveSafetensors.
std::vector<std::pair<std::string, Tensor>> hostParameters(Sequential& model);

// The model's parameters, saved under their PyTorch names.
void saveModel(const std::string& path, Sequential& model);
// Loads every parameter of `model` from `path`: names, count and shapes must
// match exactly (no silent partial load). Throws DataError.
void loadModel(const std::string& path, Sequential& model);

}  // namespace ddp::trainer
