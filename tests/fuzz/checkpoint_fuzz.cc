// Fuzz target: a checkpoint restored into a 4-3-2 MLP trained by AdamW
// (--resume): the safetensors layer, then checkCheckpoint's reading of the
// position and options in the metadata, and the copy of weights and state.
// Options are not compared (none expected), so that inputs reach the copy.
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/error.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "trainer/mlp.h"
#include "trainer/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddp::trainer;
  static const std::unique_ptr<Sequential> kModel = buildMlp(4, {3}, 2, 1);
  static AdamW optimizer(kModel->parameters(), AdamWOptions{});
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
  try {
    const SafetensorsFile file = parseSafetensors(bytes, "input");
    restoreCheckpoint("input", file, *kModel, optimizer, {});
  } catch (const ddp::DataError&) {
  }
  return 0;
}
