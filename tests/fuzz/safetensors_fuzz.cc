// Fuzz target: parseSafetensors (--init-from files, checkpoints, and the
// bytes rank 0 broadcasts) on any bytes. A file it accepts has every tensor
// inside the file: each is read whole, so AddressSanitizer sees a view that
// runs past the bytes.
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/error.h"
#include "trainer/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
  try {
    const ddp::trainer::SafetensorsFile file = ddp::trainer::parseSafetensors(bytes, "input");
    volatile float sum = 0;
    for (const auto& [name, tensor] : file.tensors) {
      for (std::size_t i = 0; i < tensor.numel(); ++i)
        sum = sum + tensor.data()[i];
    }
  } catch (const ddp::DataError&) {
  }
  return 0;
}
