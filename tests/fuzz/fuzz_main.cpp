// One libFuzzer harness; SHARDFT_FUZZ_TARGET names which target of fuzz_targets.hpp it drives.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const shardft::fuzz::Target* target = [] {
    const shardft::fuzz::Target* t = shardft::fuzz::find_target(SHARDFT_FUZZ_TARGET);
    if (t == nullptr) {
      std::fprintf(stderr, "no fuzz target named '%s'\n", SHARDFT_FUZZ_TARGET);
      std::abort();
    }
    return t;
  }();
  // An exception other than the expected ones is not caught: it terminates, and libFuzzer keeps the input.
  target->run(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
