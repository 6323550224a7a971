// Names for code addresses of this process, for the call stacks the
// watchdog prints (captured by runtime/thread_state.h).
#pragma once

#include <cstddef>
#include <string>

namespace ddp {

// "function (library)" for a code address: the dynamic symbol dladdr finds,
// else the file's own ELF symbol table (static functions and lambdas, where
// the file is not stripped), else "?? (library+0xoffset)". Demangled, without
// the parameter list (shortFunctionName). Reads each file's symbol table
// once. Any thread; serialised; never throws.
std::string nameOfAddress(const void* address);

// A demangled C++ function name without its parameter list, at most
// `maxChars` long: "ddp::Trainer::run(Observer&) const" -> "ddp::Trainer::run";
// a lambda by its number and enclosing function, "lambda #1 in ddp::f",
// with " (through std::function)" where std::function calls it.
std::string shortFunctionName(const std::string& demangled, std::size_t maxChars = 160);

}  // namespace ddp
