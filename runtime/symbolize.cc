#include "runtime/symbolize.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "runtime/str.h"

namespace ddp {
namespace {

struct FunctionSymbol {
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  std::string name;
};

// The FUNC symbols of one file's .symtab, by start address.
struct SymbolTable {
  bool fixedAddresses = false;  // ET_EXEC: symbol values are run-time addresses
  std::vector<FunctionSymbol> functions;
};

template <class T>
bool readAt(std::ifstream& file, std::uint64_t offset, T* out, std::size_t count = 1) {
  file.seekg(static_cast<std::streamoff>(offset));
  return static_cast<bool>(
      file.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(sizeof(T) * count)));
}

// Empty where the file is not a 64-bit ELF file or has no .symtab (stripped).
SymbolTable readSymbolTable(const std::string& path) {
  SymbolTable table;
  std::ifstream file(path, std::ios::binary);
  Elf64_Ehdr header{};
  if (!readAt(file, 0, &header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr)) {
    return table;
  }
  table.fixedAddresses = header.e_type == ET_EXEC;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() || !readAt(file, header.e_shoff, sections.data(), sections.size()))
    return table;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type != SHT_SYMTAB || section.sh_link >= sections.size()) continue;
    const Elf64_Shdr& names = sections[section.sh_link];
    std::vector<Elf64_Sym> symbols(section.sh_size / sizeof(Elf64_Sym));
    std::string text(names.sh_size, '\0');
    if (!readAt(file, section.sh_offset, symbols.data(), symbols.size()) ||
        !readAt(file, names.sh_offset, text.data(), text.size())) {
      return table;
    }
    for (const Elf64_Sym& symbol : symbols) {
      if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_value == 0 ||
          symbol.st_size == 0 || symbol.st_name >= text.size()) {
        continue;
      }
      table.functions.push_back({symbol.st_value, symbol.st_size, text.c_str() + symbol.st_name});
    }
  }
  std::sort(table.functions.begin(), table.functions.end(),
            [](const FunctionSymbol& a, const FunctionSymbol& b) { return a.start < b.start; });
  return table;
}

std::mutex gTablesMutex;
std::map<std::string, SymbolTable> gTables;  // by file path, read on first use

// The .symtab name of the function holding `address`, or "".
std::string symbolTableName(const Dl_info& info, const void* address) {
  std::lock_guard lock(gTablesMutex);
  auto it = gTables.find(info.dli_fname);
  if (it == gTables.end())
    it = gTables.emplace(info.dli_fname, readSymbolTable(info.dli_fname)).first;
  const SymbolTable& table = it->second;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const std::uint64_t value =
      table.fixedAddresses ? at : at - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  auto next =
      std::upper_bound(table.functions.begin(), table.functions.end(), value,
                       [](std::uint64_t v, const FunctionSymbol& f) { return v < f.start; });
  if (next == table.functions.begin()) return "";
  const FunctionSymbol& f = *std::prev(next);
  return value < f.start + f.size ? f.name : "";
}

std::string demangled(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? name.get() : symbol;
}

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string nameOfAddress(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return str("?? (", address, ")");
  const char* slash = std::strrchr(info.dli_fname, '/');
  const std::string file = slash != nullptr ? slash + 1 : info.dli_fname;
  std::string symbol = info.dli_sname != nullptr ? info.dli_sname : "";
  if (symbol.empty()) symbol = symbolTableName(info, address);
  if (symbol.empty()) {
    const auto offset = reinterpret_cast<std::uintptr_t>(address) -
                        reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    return str("?? (", file, "+0x", std::hex, offset, ")");
  }
  return str(shortFunctionName(demangled(symbol)), " (", file, ")");
}

namespace {

// `name` without its trailing qualifiers and parameter list.
std::string withoutParameters(std::string name) {
  for (bool trimmed = true; trimmed;) {
    trimmed = false;
    for (const char* qualifier : {" const", " volatile", " &&", " &", " noexcept"}) {
      if (endsWith(name, qualifier)) {
        name.resize(name.size() - std::strlen(qualifier));
        trimmed = true;
      }
    }
  }
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++depth;
      if (name[i] == '(' && --depth == 0) {
        if (i > 0) name.resize(i);
        break;
      }
    }
  }
  return name;
}

// "lambda #1 in ddp::f" for a lambda's name, "ddp::f(Args...)::{lambda(int)#1}"
// (and its "::operator()"), whose enclosing function's parameters would
// otherwise fill the line; "" for anything else.
std::string lambdaName(const std::string& name) {
  const std::size_t at = name.find("::{lambda(");
  if (at == std::string::npos) return "";
  const std::size_t number = name.find(")#", at);
  const std::size_t close = name.find('}', at);
  if (number == std::string::npos || close == std::string::npos || number > close) return "";
  std::string enclosing = withoutParameters(name.substr(0, at));
  enclosing.erase(0, enclosing.find_first_not_of(' '));
  return str("lambda #", name.substr(number + 2, close - number - 2), " in ", enclosing);
}

}  // namespace

std::string shortFunctionName(const std::string& demangledName, std::size_t maxChars) {
  std::string name = withoutParameters(demangledName);
  // std::function calling a lambda: "std::_Function_handler<void (int), L>::_M_invoke".
  constexpr std::string_view kHandler = "std::_Function_handler<";
  if (name.rfind(kHandler, 0) == 0) {
    // The callable is the template's second argument: after the first comma
    // outside brackets (the first is the signature).
    int depth = 0;
    std::size_t comma = std::string::npos;
    for (std::size_t i = kHandler.size(); i < name.size() && comma == std::string::npos; ++i) {
      if (name[i] == '<' || name[i] == '(') ++depth;
      if (name[i] == '>' || name[i] == ')') --depth;
      if (name[i] == ',' && depth == 0) comma = i;
    }
    const std::string callable = comma == std::string::npos ? "" : name.substr(comma + 1);
    if (const std::string lambda = lambdaName(callable); !lambda.empty())
      name = lambda + " (through std::function)";
  } else if (const std::string lambda = lambdaName(name); !lambda.empty()) {
    name = lambda;
  }
  if (name.size() > maxChars) name = name.substr(0, maxChars - 3) + "...";
  return name;
}

}  // namespace ddp
