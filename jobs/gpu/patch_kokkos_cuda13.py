#!/usr/bin/env python3
"""Adapts a copy of Kokkos 4.6's CUDA backend to the CUDA 13 runtime API, in place.

CUDA 13 changed three runtime calls Kokkos 4.6.01 makes:
  cudaGraphAddDependencies(graph, from, to, n)        -> gains an edge-data argument (nullptr: plain edges)
  cudaMemAdvise(ptr, n, advice, int device)           -> takes a cudaMemLocation
  cudaMemPrefetchAsync(ptr, n, int device, stream)    -> takes a cudaMemLocation and flags
Each call is replaced by a `#if CUDART_VERSION >= 13000` block, so the patched tree still builds with
CUDA 12. (Kokkos_CudaSpace.cpp has one more cudaMemAdvise, compiled only with
KOKKOS_IMPL_DEBUG_CUDA_PIN_UVM_TO_HOST, which this build never sets.) Runs on the copy jobs/gpu/build.sh makes under .cache/, never on the caller's source tree.
Exits non-zero when a call it must change is not where Kokkos 4.6 has it (another Kokkos version:
check whether it needs these changes at all).

usage: patch_kokkos_cuda13.py KOKKOS_TREE
"""
import pathlib
import sys

MARK = "shardft: CUDA 13 runtime API"

INSTANCE = "core/src/Cuda/Kokkos_Cuda_Instance.hpp"


def location(var, device):
    # cudaCpuDeviceId means host memory; any other id is a device ordinal.
    return (f"cudaMemLocation {var}{{}};\n"
            f"    {var}.type = ({device}) == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;\n"
            f"    {var}.id = ({device});\n")


EDITS = {
    INSTANCE: [
        ("    return cudaGraphAddDependencies(graph, from, to, numDependencies);\n",
         f"#if CUDART_VERSION >= 13000  // {MARK}\n"
         "    return cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies);\n"
         "#else\n"
         "    return cudaGraphAddDependencies(graph, from, to, numDependencies);\n"
         "#endif\n"),
        ("    return cudaMemAdvise(devPtr, count, advice, device);\n",
         f"#if CUDART_VERSION >= 13000  // {MARK}\n"
         "    " + location("loc", "device") +
         "    return cudaMemAdvise(devPtr, count, advice, loc);\n"
         "#else\n"
         "    return cudaMemAdvise(devPtr, count, advice, device);\n"
         "#endif\n"),
        ("    return cudaMemPrefetchAsync(devPtr, count, dstDevice,\n"
         "                                get_input_stream(stream));\n",
         f"#if CUDART_VERSION >= 13000  // {MARK}\n"
         "    " + location("loc", "dstDevice") +
         "    return cudaMemPrefetchAsync(devPtr, count, loc, 0, get_input_stream(stream));\n"
         "#else\n"
         "    return cudaMemPrefetchAsync(devPtr, count, dstDevice,\n"
         "                                get_input_stream(stream));\n"
         "#endif\n"),
    ],
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    tree = pathlib.Path(sys.argv[1])
    for rel, edits in EDITS.items():
        path = tree / rel
        if not path.is_file():
            sys.exit(f"patch_kokkos_cuda13: {path}: not found (is {tree} a Kokkos 4.6 source tree?)")
        text = path.read_text()
        if MARK in text:
            continue  # patched already
        for old, new in edits:
            if text.count(old) != 1:
                sys.exit(f"patch_kokkos_cuda13: {path}: expected exactly one occurrence of\n{old}"
                         f"found {text.count(old)}; this Kokkos version needs its own CUDA 13 changes")
            text = text.replace(old, new)
        path.write_text(text)
        print(f"patch_kokkos_cuda13: patched {rel}")


if __name__ == "__main__":
    main()
