#pragma once
// The one-rank communicator the single-process tests build trainers and engines over.
#include "comm/self_communicator.hpp"

namespace shardft {

inline SelfCommunicator& self() {
  static SelfCommunicator c;
  return c;
}

}  // namespace shardft
