#pragma once
// A second queue of device work beside the compute stream, with numbered marks the compute stream can
// wait for without the host waiting. The optimizer updates one block after another there while the
// compute stream goes on into the next step's forward, which waits only for the block it is about to
// read (parallel/zero: optimizer_overlap). On a GPU build it is a CUDA stream of its own and the marks
// are events (kernels/cuda/side_stream); the compute stream is raised above it in priority, so the side
// work takes the SMs the compute work leaves free rather than the other way round. On the host backends every kernel runs in issue order, so the
// side queue is the compute queue itself and there is nothing to wait for.
#include <memory>
#include <string>

#include "kernels/types.hpp"

namespace shardft {

class SideQueue {
 public:
  // Marks 0 .. marks - 1. gemm_sm_reserve > 0: while side work is pending (marked and not yet waited
  // for), the compute stream's GEMMs are sized for that many SMs fewer than the GPU has (cuBLAS's SM
  // count target), so the side work runs on SMs of its own beside them and not only in the gaps between
  // kernels; GEMMs sized so may pick another algorithm, and round differently. It must leave the GPU an
  // SM (std::invalid_argument). 0: the GEMMs take every SM. The host backends have no GPU to share: it
  // changes nothing there, and describe() says so.
  explicit SideQueue(int marks, int gemm_sm_reserve = 0);
  ~SideQueue();
  SideQueue(const SideQueue&) = delete;
  SideQueue& operator=(const SideQueue&) = delete;

  // The execution space whose kernels run on this queue.
  ExecSpace space() const;
  // Whether it is a queue of its own (a GPU build), not the compute queue.
  bool separate() const { return separate_queues(); }
  // Whether this build's side queues are queues of their own (asked before making one).
  static bool separate_queues();
  // Side work issued from now on starts after the compute work issued so far.
  void follow_compute();
  // Mark k: the side work issued so far. The compute stream's next wait_for(k) waits for it.
  void mark(int k);
  // Compute work issued from now on starts after mark k, where k was marked since the last wait for it
  // (else nothing to wait for).
  void wait_for(int k);
  // The compute stream waits for every pending mark.
  void wait_for_all();
  // Where the side work runs, for the start-up log: its stream and the two streams' priorities.
  std::string describe() const;

 private:
  static void check_marks(int marks, int gemm_sm_reserve);  // a negative count: std::invalid_argument
  static void check_mark(int k, std::size_t marks);  // k outside 0 .. marks - 1: std::out_of_range

  struct Impl;  // the backend's queue
  int marks_ = 0;
  int gemm_sm_reserve_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardft
