#pragma once
// The byte ledger: what each rank sends, per group and per collective, counted the way bandwidth
// theory counts it (nccl-tests' "bus bytes"): a ring all-reduce of B bytes over N ranks sends
// 2B(N-1)/N per rank, a reduce-scatter or all-gather of B total bytes sends B(N-1)/N, a broadcast B
// from the root's view of the pipeline ((N-1)/N per rank on average), an all-to-all B(N-1)/N.
// ZeRO's traffic claims (2 Psi for stages 0-2, 3 Psi for stage 3) are checked against these numbers.
#include <cstdint>
#include <map>
#include <string>

namespace shardft {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all };
const char* collective_name(Collective c);

// Bytes one rank sends for a collective over `total_bytes` (the full, unsharded payload) on n ranks.
double bus_bytes(Collective c, double total_bytes, int n);

class ByteLedger {
 public:
  // Whether the group this ledger belongs to has ranks on more than one node: then every byte it
  // sends counts as inter-node (DeepSpeed's accounting for ZeRO++), otherwise as intra-node.
  void set_crosses_nodes(bool crosses) { crosses_nodes_ = crosses; }
  bool crosses_nodes() const { return crosses_nodes_; }

  void record(Collective c, double bytes_sent) {
    by_collective_[c] += bytes_sent;
    total_ += bytes_sent;
    (crosses_nodes_ ? inter_node_ : intra_node_) += bytes_sent;
    ++calls_;
  }
  double total() const { return total_; }
  double inter_node() const { return inter_node_; }
  double intra_node() const { return intra_node_; }
  double of(Collective c) const {
    auto it = by_collective_.find(c);
    return it == by_collective_.end() ? 0.0 : it->second;
  }
  std::int64_t calls() const { return calls_; }
  void reset() {
    by_collective_.clear();
    total_ = inter_node_ = intra_node_ = 0;
    calls_ = 0;
  }

 private:
  std::map<Collective, double> by_collective_;
  bool crosses_nodes_ = false;
  double total_ = 0, inter_node_ = 0, intra_node_ = 0;
  std::int64_t calls_ = 0;
};

}  // namespace shardft
