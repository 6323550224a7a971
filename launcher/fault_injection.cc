#include "launcher/fault_injection.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/log.h"

namespace ddp::launcher {
namespace {

std::vector<std::string> splitColons(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ':'))
    parts.push_back(part);
  return parts;
}

template <class T>
bool parseNumber(const std::string& text, T& value) {
  std::istringstream in(text);
  return static_cast<bool>(in >> value) && in.eof();
}

}  // namespace

FaultInjection parseFaultInjection(const std::string& text) {
  FaultInjection fault;
  if (text.empty()) return fault;
  const std::vector<std::string> parts = splitColons(text);
  const auto bad = [&] {
    return UsageError(
        str("--inject-fault: expected stall:RANK:STEP:SECONDS, slow:RANK:STEP:SECONDS, "
            "desync:RANK:STEP, nonfinite:RANK:STEP, bitflip:RANK:STEP, error:RANK:STEP, "
            "oom:RANK:STEP or "
            "hang:RANK:STEP:SECONDS, RANK a rank or all (got '",
            text, "')"));
  };
  if (parts.empty()) throw bad();
  const bool timed = parts[0] == "stall" || parts[0] == "slow" || parts[0] == "hang";
  const std::size_t expected = timed ? 4 : 3;
  if (parts[0] == "stall") {
    fault.kind = FaultInjection::Kind::kStall;
  } else if (parts[0] == "slow") {
    fault.kind = FaultInjection::Kind::kSlow;
  } else if (parts[0] == "desync") {
    fault.kind = FaultInjection::Kind::kDesync;
  } else if (parts[0] == "nonfinite") {
    fault.kind = FaultInjection::Kind::kNonFinite;
  } else if (parts[0] == "bitflip") {
    fault.kind = FaultInjection::Kind::kBitFlip;
  } else if (parts[0] == "error") {
    fault.kind = FaultInjection::Kind::kError;
  } else if (parts[0] == "oom") {
    fault.kind = FaultInjection::Kind::kOutOfMemory;
  } else if (parts[0] == "hang") {
    fault.kind = FaultInjection::Kind::kHang;
  } else {
    throw bad();
  }
  long long step = 0;
  if (parts.size() == expected && parts[1] == "all") {
    fault.rank = FaultInjection::kAllRanks;
  } else if (parts.size() != expected || !parseNumber(parts[1], fault.rank) || fault.rank < 0) {
    throw bad();
  }
  // Step 0: a stall during start-up, while the data loads (stall only).
  const long long first = fault.kind == FaultInjection::Kind::kStall ? 0 : 1;
  if (!parseNumber(parts[2], step) || step < first) {
    throw bad();
  }
  fault.step = static_cast<std::size_t>(step);
  if (timed && (!parseNumber(parts[3], fault.seconds) || !(fault.seconds >= 0))) {
    throw bad();
  }
  return fault;
}

void stallAtStartUp(const FaultInjection& fault, int rank) {
  if (fault.kind != FaultInjection::Kind::kStall || fault.step != 0 ||
      (fault.rank != rank && fault.rank != FaultInjection::kAllRanks))
    return;
  log::warn(str("--inject-fault: stalling for ", fault.seconds, " s while loading the data"));
  std::this_thread::sleep_for(std::chrono::duration<double>(fault.seconds));
}

void installFault(const FaultInjection& fault, comm::Communicator& comm, trainer::Sequential& model,
                  trainer::TrainOptions& options) {
  if (fault.kind == FaultInjection::Kind::kNone ||
      (fault.rank != comm.rank() && fault.rank != FaultInjection::kAllRanks))
    return;
  switch (fault.kind) {
    case FaultInjection::Kind::kStall:
      options.beforeStep = [fault](std::size_t step) {
        if (step != fault.step) return;
        log::warn(str("--inject-fault: stalling for ", fault.seconds, " s before step ", step));
        std::this_thread::sleep_for(std::chrono::duration<double>(fault.seconds));
      };
      break;
    case FaultInjection::Kind::kSlow:
      options.beforeStep = [fault](std::size_t step) {
        if (step == fault.step) {
          log::warn(
              str("--inject-fault: ", fault.seconds, " s slower in every step from step ", step));
        }
        if (step >= fault.step)
          std::this_thread::sleep_for(std::chrono::duration<double>(fault.seconds));
      };
      break;
    case FaultInjection::Kind::kDesync:
      options.beforeStep = [fault, &comm](std::size_t step) {
        if (step != fault.step) return;
        log::warn(str("--inject-fault: issuing an extra barrier before step ", step));
        comm.barrier();  // never completes: the peers issue the step's collectives instead
      };
      break;
    case FaultInjection::Kind::kNonFinite:
      options.poisonGradients = [fault](std::size_t step) {
        if (step == fault.step) log::warn(str("--inject-fault: NaN gradients in step ", step));
        return step == fault.step;
      };
      break;
    case FaultInjection::Kind::kBitFlip:
      options.beforeStep = [fault, &model](std::size_t step) {
        if (step != fault.step) return;
        trainer::Parameter& first = *model.parameters().front();
        trainer::Tensor host = first.value.onHost();  // the parameter itself on a CPU
        std::uint32_t bits = 0;
        std::memcpy(&bits, host.data(), sizeof bits);
        // A high bit of the mantissa (the value changes by 1/8): a low one can
        // be rounded away by the next updates, as a real flip of it can.
        bits ^= 1u << 20;
        std::memcpy(host.data(), &bits, sizeof bits);
        if (host.data() != first.value.data()) first.value.copyFrom(host);
        log::warn(str("--inject-fault: flipped one bit of ", first.name, " before step ", step));
      };
      break;
    case FaultInjection::Kind::kError:
      options.beforeStep = [fault](std::size_t step) {
        if (step == fault.step) throw DataError(str("--inject-fault: failing before step ", step));
      };
      break;
    case FaultInjection::Kind::kOutOfMemory:
      options.beforeStep = [fault, &model](std::size_t step) {
        if (step != fault.step) return;
        // 2^50 floats: more than any host or GPU has, refused at once.
        trainer::Tensor tooLarge({std::size_t{1} << 20, std::size_t{1} << 30}, model.device());
      };
      break;
    case FaultInjection::Kind::kHang:
      options.beforeStep = [fault, &comm](std::size_t step) {
        if (step != fault.step) return;
        log::warn(str("--inject-fault: step ", step, "'s first collective waits ", fault.seconds,
                      " s where the library runs it"));
        comm.holdNextCollective(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(fault.seconds)));
      };
      break;
    case FaultInjection::Kind::kNone:
      break;
  }
}

}  // namespace ddp::launcher
