// Test helper: prints the byte offset in FILE of DATASET's raw data, so a CLI test can flip one bit of
// a checkpoint's dataset as bit rot would (without h5py). Exit 1 when the dataset is missing or not
// stored contiguously.
// Usage: shardft_h5_offset FILE DATASET
#include <hdf5.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FILE DATASET\n", argv[0]);
    return 2;
  }
  const hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return 1;
  const hid_t set = H5Dopen2(file, argv[2], H5P_DEFAULT);
  if (set < 0) return 1;
  const haddr_t at = H5Dget_offset(set);
  H5Dclose(set);
  H5Fclose(file);
  if (at == HADDR_UNDEF) return 1;
  std::printf("%llu\n", static_cast<unsigned long long>(at));
  return 0;
}
