#include "comm/mpi_wait.hpp"

namespace shardft {

void mpi_wait(MPI_Request& request, const WaitSite& site) {
  if (request == MPI_REQUEST_NULL) return;
  wait_until(
      [&] {
        int done = 0;
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        return done != 0;
      },
      site);
}

void mpi_wait_all(int count, MPI_Request* requests, const WaitSite& site) {
  wait_until(
      [&] {
        int done = 0;
        MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
        return done != 0;
      },
      site);
}

}  // namespace shardft
