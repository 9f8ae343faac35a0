#include "comm/ledger.hpp"

namespace shardft {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_gather: return "all_gather";
    case Collective::broadcast: return "broadcast";
    case Collective::all_to_all: return "all_to_all";
  }
  return "?";
}

double bus_bytes(Collective c, double total_bytes, int n) {
  if (n <= 1) return 0.0;
  const double share = static_cast<double>(n - 1) / n;
  return c == Collective::all_reduce ? 2.0 * total_bytes * share : total_bytes * share;
}

}  // namespace shardft
