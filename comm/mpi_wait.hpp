#pragma once
// Waiting for MPI requests with collective_timeout_s's deadline: MPI_Wait would block forever on a
// collective a stopped or dead rank never joins, so the backend polls (MPI_Test moves the request on
// as MPI_Wait would) and reports the timeout past the limit (comm/collective_timeout.hpp).
#include <mpi.h>

#include "comm/collective_timeout.hpp"

namespace shardft {

void mpi_wait(MPI_Request& request, const WaitSite& site);
void mpi_wait_all(int count, MPI_Request* requests, const WaitSite& site);

}  // namespace shardft
