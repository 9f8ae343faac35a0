#!/usr/bin/env python3
"""NF4 fixture for kernels/nf4_quantize: what bitsandbytes stores for one fixed tensor.

Path that makes the fixture: bitsandbytes itself (pip `bitsandbytes`, its CPU backend):
    F.quantize_4bit(x, blocksize=64, compress_statistics=True, quant_type="nf4")
    F.dequantize_4bit(packed, state)
Run it in a venv that has bitsandbytes (not .cache/hfvenv):
    python3 -m venv --system-site-packages /work/bnbvenv && /work/bnbvenv/bin/pip install bitsandbytes
    /work/bnbvenv/bin/python tests/reference/make_nf4_fixture.py

bitsandbytes' CPU backend and its CUDA kernels (csrc/kernels.cu: kQuantizeBlockwise with
dQuantizeNF4 for the 4-bit values, dQuantize<0> over create_dynamic_map(signed=True) for the
absmax) are two implementations of one format. shardft follows the CUDA kernels, since that is
what QLoRA checkpoints are made with. So before writing, this script re-derives every stored byte
with `cuda_rules_*` below, a numpy transliteration of those CUDA kernels, and asserts that
bitsandbytes' output equals it byte for byte: the fixture is valid for both. It also checks the
published constants (the QLoRA paper's 16 NF4 values, entries of the dynamic map).

The offset is torch's fp32 mean of the absmax, whose summation order is torch's own (CPU and CUDA
differ); shardft sums in double and rounds once. meta.json holds both; they may differ by an ulp.

The two differ in these cases:
  * dQuantizeNF4's thresholds are float literals (decimal rounded once to fp32); the CPU backend uses
    fp32 midpoints of the code values. 4 of the 15 differ by one ulp, so a value exactly on one of
    them gets the upper index on CPU, the lower on CUDA. The fixture's tie block holds these 4 values;
    the fixture stores CUDA's nibbles there (asserted: the only bytes where the two differ).
  * an all-zero 64-block: CUDA computes 0 * (1/0) = NaN, which its decision tree sends to index 0;
    the CPU backend clamps the absmax and gives index 7. Both dequantize to 0.
  * the CPU backend's 8-bit blockwise quantizer snaps the scaled absmax to a 65536-bin lookup
    table, so a value within ~3e-5 of a midpoint between two map entries may get the farther
    one; CUDA's binary search (dQuantize<0>) takes the nearest. make_input's tensor is nudged
    (64-blocks scaled by 1.0005, see main) until no stored byte falls in such a case.

Files (tests/reference/nf4/, raw little-endian):
  input.f32     the tensor, shape meta.shape, row-major
  packed.u8     two NF4 indices per byte, element 2j in the high nibble, 2j+1 in the low one
  absmax_q.u8   per 64-block absmax, 8-bit code of (absmax - offset) in the dynamic map
  absmax2.f32   per 256-block absmax of (absmax - offset)
  code2.f32     the 256 values of create_dynamic_map(signed=True)
  dequant.f32   dequantize_4bit(...) in fp32
  meta.json     shape, blocksizes, offset (value and fp32 bits), bitsandbytes and torch versions
"""
import json
import os
import struct
import sys

from decimal import Decimal
from fractions import Fraction

import numpy as np
import torch

import bitsandbytes
import bitsandbytes.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nf4")
SHAPE = (89, 191)  # 16999 values: 266 blocks of 64 (last one 39 values), 2 blocks of 256 (second: 10)
BLOCK, BLOCK2 = 64, 256

# QLoRA paper, appendix E / bitsandbytes get_4bit_type("nf4").
NF4_PUBLISHED = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                 -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]
# dQuantizeNF4's decision-tree thresholds (midpoints of neighbouring code values).
NF4_THRESHOLDS = [-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
                  -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
                  0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
                  0.5016634166240692, 0.6427869200706482, 0.8614784181118011]


def f32_from_decimal(text):
    """The fp32 value a C/CUDA literal `<text>f` has: the decimal rounded once to fp32. np.float32(float)
    rounds twice (to double, then to fp32) and differs for 4 of the 15 thresholds, which lie within an
    ulp of a tie."""
    exact = Fraction(Decimal(text))
    near = np.float32(float(exact))
    cands = [np.nextafter(near, np.float32(-2)), near, np.nextafter(near, np.float32(2))]
    return min(cands, key=lambda c: abs(Fraction(float(c)) - exact))


# dQuantizeNF4 as nvcc compiles it.
CUDA_THRESHOLDS = np.array([f32_from_decimal(repr(t)) for t in NF4_THRESHOLDS], np.float32)


def make_input():
    rng = np.random.default_rng(20261218)
    x = rng.standard_normal(SHAPE[0] * SHAPE[1]).astype(np.float32) * np.float32(0.02)
    # Layer-like scale drift so the 64-block absmax spread over a range (double quant has work).
    x *= np.repeat(np.linspace(0.5, 2.0, (x.size + BLOCK - 1) // BLOCK, dtype=np.float32), BLOCK)[: x.size]
    x[rng.choice(x.size, 40, replace=False)] *= np.float32(40.0)  # outliers
    x[rng.choice(x.size, 300, replace=False)] = 0.0  # exact zeros
    x[::997] = 0.0
    # One block whose absmax is exactly 1.0 holds every threshold and its neighbours: ties go down.
    b = 5 * BLOCK
    t = CUDA_THRESHOLDS
    x[b : b + 15] = t
    x[b + 15 : b + 30] = np.nextafter(t, np.float32(2))
    x[b + 30 : b + 45] = np.nextafter(t, np.float32(-2))
    x[b + 45] = -1.0
    x[b + 46 : b + BLOCK] = 0.0
    x[b + 46] = 1.0
    # One block whose absmax is a negative value.
    x[9 * BLOCK + 3] = -np.abs(x[9 * BLOCK : 10 * BLOCK]).max() * np.float32(1.5)
    return x


def cuda_rules_nf4(x):
    """kQuantizeBlockwise<NF4>: v * (1/absmax) in fp32, then dQuantizeNF4 (x > t goes up)."""
    n = x.size
    nb = (n + BLOCK - 1) // BLOCK
    xp = np.zeros(nb * BLOCK, np.float32)
    xp[:n] = x  # the kernel loads the missing tail as 0
    absmax = np.abs(xp.reshape(nb, BLOCK)).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = xp.reshape(nb, BLOCK) * (np.float32(1) / absmax)[:, None]
    idx = np.searchsorted(CUDA_THRESHOLDS, scaled.reshape(-1), side="left")
    idx[np.isnan(scaled.reshape(-1))] = 0
    idx = idx[: n + (n % 2)].astype(np.uint8)
    return ((idx[0::2] << 4) | idx[1::2]).astype(np.uint8), absmax.astype(np.float32)


def cuda_dquantize(code, x):
    """dQuantize<0>: the CUDA kernel's binary search over the 256-entry map, then nearest neighbour."""
    pivot, upper_pivot, lower_pivot = 127, 255, 0
    lower, upper = np.float32(-1), np.float32(1)
    val = code[pivot]
    i = 64
    while i > 0:
        if x > val:
            lower_pivot, lower, pivot = pivot, val, pivot + i
        else:
            upper_pivot, upper, pivot = pivot, val, pivot - i
        val = code[pivot]
        i >>= 1
    if upper_pivot == 255:
        upper = code[upper_pivot]
    if lower_pivot == 0:
        lower = code[lower_pivot]
    if x > val:
        return upper_pivot if x > (upper + val) * np.float32(0.5) else pivot
    return lower_pivot if x < (lower + val) * np.float32(0.5) else pivot


def cuda_rules_blockwise(a, code):
    n = a.size
    nb = (n + BLOCK2 - 1) // BLOCK2
    q = np.zeros(n, np.uint8)
    absmax2 = np.zeros(nb, np.float32)
    for k in range(nb):
        blk = a[k * BLOCK2 : (k + 1) * BLOCK2]
        absmax2[k] = np.abs(blk).max()
        inv = np.float32(1) / absmax2[k]
        for j, v in enumerate(blk):
            q[k * BLOCK2 + j] = cuda_dquantize(code, np.float32(v * inv))
    return q, absmax2


def main():
    np.seterr(over="raise")
    torch.set_num_threads(1)
    code4 = F.get_4bit_type("nf4", device="cpu").numpy()
    assert (code4 == np.array(NF4_PUBLISHED, np.float32)).all(), "NF4 code book differs from the QLoRA values"
    # The CPU backend's thresholds are fp32 midpoints of the code; the CUDA literals round 4 of them
    # to the neighbouring fp32 value. Only an exact tie sees the difference (tested in the tie block).
    mids = ((code4[:-1] + code4[1:]) / np.float32(2)).astype(np.float32)
    cpu_differs = np.nonzero(mids != CUDA_THRESHOLDS)[0]
    assert list(cpu_differs) == [0, 8, 12, 14], cpu_differs
    assert (np.abs(mids.view(np.int32) - CUDA_THRESHOLDS.view(np.int32)) <= 1).all()
    code2 = F.create_dynamic_map(signed=True).numpy().astype(np.float32)
    assert code2.size == 256 and (np.diff(code2) > 0).all()
    # Known entries: 0 and 1 exact; the largest mean (0.9859375 + 1) / 2 and the smallest 1e-6 * 0.55.
    assert code2[127] == 0 and code2[255] == 1 and (code2[:127] == -code2[254:127:-1]).all()
    assert np.isclose(code2[254], 0.99296875, rtol=1e-6, atol=0) and np.isclose(code2[128], 5.5e-7, rtol=1e-6, atol=0)

    x = make_input()
    # The CPU backend's 8-bit quantizer snaps to a 65536-bin table, so a scaled absmax within a bin
    # of a midpoint between two map entries may get the farther entry. Such 64-blocks are scaled by
    # 1.0005 until bitsandbytes' bytes equal the CUDA rules everywhere (a few rounds).
    for rounds in range(100):
        packed_t, st = F.quantize_4bit(torch.from_numpy(x.reshape(SHAPE)), blocksize=BLOCK,
                                       compress_statistics=True, quant_type="nf4")
        offset = np.float32(st.offset.item())
        ref_packed, ref_absmax = cuda_rules_nf4(x)
        ref_q, ref_absmax2 = cuda_rules_blockwise((ref_absmax - offset).astype(np.float32), code2)
        bad = np.nonzero(ref_q != st.absmax.numpy().reshape(-1))[0]
        if bad.size == 0:
            break
        for k in bad:
            x[k * BLOCK : (k + 1) * BLOCK] *= np.float32(1.0005)
    else:
        raise AssertionError("could not avoid the CPU lookup-table cases")
    # The tie values at the 4 thresholds where the backends differ: the fixture keeps CUDA's nibble.
    # (On each of the 4, the value on the upper of the two fp32 neighbours goes up on one backend only.)
    scaled = x * np.repeat(np.float32(1) / ref_absmax, BLOCK)[: x.size]
    split = np.nonzero(np.searchsorted(mids, scaled, side="left") != np.searchsorted(CUDA_THRESHOLDS, scaled, side="left"))[0]
    assert len(split) == 4 and (split // BLOCK == 5).all(), split
    bnb_packed = packed_t.numpy().reshape(-1)
    differ = np.nonzero(bnb_packed != ref_packed)[0]
    assert list(differ) == list(np.unique(split // 2)), (differ, split)
    packed_t = torch.from_numpy(ref_packed.copy()).reshape(packed_t.shape)
    deq = F.dequantize_4bit(packed_t, st).numpy().reshape(-1)
    packed = packed_t.numpy().reshape(-1)
    absmax_q = st.absmax.numpy().reshape(-1)
    absmax2 = st.state2.absmax.numpy().reshape(-1)
    assert st.state2.blocksize == BLOCK2 and st.blocksize == BLOCK
    assert (st.state2.code.numpy() == code2).all()

    # The same bytes by the CUDA kernels' rules.
    assert (ref_packed == packed).all(), f"{(ref_packed != packed).sum()} packed bytes differ from the CUDA rules"
    # torch's fp32 mean sums in its own order (another on CUDA); shardft sums in double and rounds
    # once. They may differ by an ulp, so the second level below is derived from torch's offset.
    ref_offset = np.float32(np.float64(ref_absmax).mean())
    assert abs(ref_offset - offset) <= np.spacing(offset), f"offset {offset!r} vs mean {ref_offset!r}"
    assert (ref_absmax2 == absmax2).all() and (ref_q == absmax_q).all(), "double quantization differs"
    am = (code2[ref_q] * np.repeat(ref_absmax2, BLOCK2)[: ref_q.size] + offset).astype(np.float32)
    vals = np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[: x.size]
    ref_deq = (code4[vals] * np.repeat(am, BLOCK)[: x.size]).astype(np.float32)
    assert (ref_deq == deq).all(), "dequantized values differ"
    assert (np.abs(x - deq) > 0).any() and (x == 0).sum() >= 300

    os.makedirs(OUT, exist_ok=True)
    for name, arr in [("input.f32", x), ("packed.u8", packed), ("absmax_q.u8", absmax_q),
                      ("absmax2.f32", absmax2), ("code2.f32", code2), ("dequant.f32", deq)]:
        arr.astype(arr.dtype.newbyteorder("<")).tofile(os.path.join(OUT, name))
    meta = {
        "nudge_rounds": rounds,
        "made_by": f"bitsandbytes {bitsandbytes.__version__} (CPU backend), torch {torch.__version__}; "
                   "checked byte for byte against the CUDA kernels' rules; "
                   "the 4 exact-tie values where the CPU backend's midpoints differ from CUDA's thresholds "
                   "carry CUDA's nibble",
        "shape": list(SHAPE), "numel": int(x.size), "blocksize": BLOCK, "blocksize2": BLOCK2,
        "offset": float(offset), "offset_bits": struct.unpack("<I", struct.pack("<f", offset))[0],
        "offset_double_mean_bits": struct.unpack("<I", struct.pack("<f", ref_offset))[0],
        "blocks": int(absmax_q.size), "blocks2": int(absmax2.size), "packed_bytes": int(packed.size),
    }
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {meta}", file=sys.stderr)


if __name__ == "__main__":
    main()
