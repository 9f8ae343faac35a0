#pragma once
// Collectives of the MPI backend built from point-to-point messages, where Open MPI's own are slow.
//
// Reduce-scatter by pairwise exchange: with N ranks, in step k = 1..N-1 rank r sends block (r+k) mod N
// of its input to rank (r+k) mod N and receives its own block from rank (r-k) mod N, folding it into
// the result:  out_r = in_r[r] (+) in_{r-1}[r] (+) in_{r-2}[r] ... (+) in_{r-N+1}[r]  (ranks mod N,
// folded left to right whatever order the messages arrive in, so every bit of the result is fixed).
// Each rank sends and reduces (N-1)/N of the buffer once, so the work is spread evenly; Open MPI
// 4.1's MPI_(I)reduce_scatter_block reduces the whole buffer on one rank and scatters it after, which
// measured 2.5-4x slower at 2 ranks (perf/comm, reduce_scatter rows).
//
// All-reduce as that reduce-scatter over N near-equal blocks of the buffer followed by a gather of
// the reduced blocks (each rank sends its block to every other): 2 (N-1)/N of the buffer per rank, the
// bandwidth-optimal schedule; Open MPI's measured 1.4x slower at 2 ranks for 64 MB. It pays for large
// buffers only (N-1 latencies twice): the backend keeps MPI's for small ones.
//
// All-gather as direct messages: each rank sends its block to every other one. Open MPI's nonblocking
// all-gather measured 1.3-1.5x slower (2 and 4 ranks, 6-13 MB).
//
// The returned requests advances in test(): a step whose message has arrived is folded in and the
// receive after the next one posted, so a caller overlapping the reduction with compute moves it on
// by testing now and then.
#include <mpi.h>

#include <cstddef>

#include "comm/collective_timeout.hpp"
#include "comm/communicator.hpp"

namespace shardft {

// The MPI type that carries t (bf16 travels as 16-bit patterns).
MPI_Datatype mpi_datatype(DType t);
// count as MPI's int count; throws std::length_error beyond INT32_MAX elements.
int mpi_count(std::size_t count);

// out[i] = a[i] op b[i] for n elements of t; out may alias a or b. bf16 is combined in fp32 and
// rounded to nearest even. Throws std::invalid_argument for 8-bit integers.
void reduce_elements(DType t, ReduceOp op, const void* a, const void* b, void* out, std::size_t n);

// send holds N * count elements and must not overlap recv (count elements). `tag` must differ from
// that of every other pairwise collective in flight on comm; all ranks pass the same one. Waits end
// at `site`'s deadline (comm/collective_timeout.hpp); the default site has the default limit.
RequestPtr start_pairwise_reduce_scatter(MPI_Comm comm, int tag, const void* send, void* recv, std::size_t count,
                                         DType t, ReduceOp op, const WaitSite& site = {});

// recv holds N * count elements, block r being rank r's send; send may be recv's own block.
RequestPtr start_pairwise_all_gather(MPI_Comm comm, int tag, const void* send, void* recv, std::size_t count, DType t,
                                     const WaitSite& site = {});

// recv = send reduced over ranks, count elements; send == recv is in place. Same tag rule.
RequestPtr start_pairwise_all_reduce(MPI_Comm comm, int tag, const void* send, void* recv, std::size_t count, DType t,
                                     ReduceOp op, const WaitSite& site = {});

}  // namespace shardft
