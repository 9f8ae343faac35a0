#!/usr/bin/python3
"""Reference fixtures for shardft: a tiny Llama-family decoder written directly in torch.

Writes, next to this script:
  tiny_gqa_untied.json        / tiny_gqa_untied.bin
  tiny_mha_tied.json          / tiny_mha_tied.bin
  tiny_qwen2_bias.json        / tiny_qwen2_bias.bin        (q/k/v biases, as Qwen2)
  tiny_llama_attn_bias.json   / tiny_llama_attn_bias.bin   (q/k/v/o biases, Llama attention_bias)

Each .json holds the model config (HF config.json key names), one micro-batch (input ids,
position ids, packed-sample ids, already shifted targets), the fp32 loss, and the list of
tensors stored in the matching .bin (raw little-endian float32, concatenated): every parameter's
weight and its gradient dloss/dw, plus the first row's logits for debugging.

The math follows Hugging Face's LlamaForCausalLM exactly (Qwen2ForCausalLM for the q/k/v biases;
see README.md next to this file);
it is written out here so that no transformers install is needed.

Before writing anything the script checks itself: the fp32 autograd gradients must agree with a
float64 re-run, and central finite differences of the float64 loss must agree with float64
autograd for a few weight entries.

Regenerate with:  /usr/bin/python3 tests/reference/make_fixtures.py [fixture names...]
(no names: all of them)
(needs Debian's python3-torch and python3-numpy).
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

IGNORE = -100
HERE = os.path.dirname(os.path.abspath(__file__))

# Single-threaded fp32 math so that reruns on one machine give identical bits.
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

def qkv_bias(cfg):
    """q/k/v projections carry biases (Qwen2; Llama's attention_bias)."""
    return cfg.get("qkv_bias", False)


def o_bias(cfg):
    """o_proj carries a bias (Llama's attention_bias)."""
    return cfg.get("o_bias", False)


def param_specs(cfg):
    """(name, shape, is_norm) in the order the fixture stores them: HF's state_dict order, each
    bias right after its weight."""
    V, d, L = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv, inter = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    hd = d // nh
    specs = [("model.embed_tokens.weight", [V, d], False)]
    for l in range(L):
        p = f"model.layers.{l}."
        specs.append((p + "input_layernorm.weight", [d], True))
        for proj, out, has_bias in (("q", nh * hd, qkv_bias(cfg)), ("k", nkv * hd, qkv_bias(cfg)),
                                    ("v", nkv * hd, qkv_bias(cfg)), ("o", d, o_bias(cfg))):
            fan_in = nh * hd if proj == "o" else d
            specs.append((p + f"self_attn.{proj}_proj.weight", [out, fan_in], False))
            if has_bias:
                specs.append((p + f"self_attn.{proj}_proj.bias", [out], False))
        specs += [
            (p + "post_attention_layernorm.weight", [d], True),
            (p + "mlp.gate_proj.weight", [inter, d], False),
            (p + "mlp.up_proj.weight", [inter, d], False),
            (p + "mlp.down_proj.weight", [d, inter], False),
        ]
    specs.append(("model.norm.weight", [d], True))
    if not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", [V, d], False))
    return specs


def init_params(cfg, gen):
    """Matrices and biases ~ N(0, 0.1^2) (biases nonzero, so that they matter); norm weights
    1 + 0.1 * N(0, 1). Drawn in param_specs order."""
    params = {}
    for name, shape, is_norm in param_specs(cfg):
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        params[name] = (1.0 + 0.1 * x) if is_norm else 0.1 * x
    return params


def linear(params, x, name):
    """HF nn.Linear: x @ W^T (+ b when the model has that bias)."""
    y = x @ params[name + ".weight"].T
    b = params.get(name + ".bias")
    return y if b is None else y + b


# --------------------------------------------------------------------------------------------
# The model (HF Llama semantics)
# --------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(position_ids, hd, theta, dtype):
    # inv_freq[i] = theta^(-2i/hd), i < hd/2; angle = pos * inv_freq; halves repeated.
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=dtype) / hd))
    freqs = position_ids.to(dtype)[..., None] * inv_freq            # [B, T, hd/2]
    emb = torch.cat((freqs, freqs), dim=-1)                          # [B, T, hd]
    return emb.cos(), emb.sin()


def attention_mask(seq_ids):
    """[B, T, T] bool: query i may see key j iff j <= i and both belong to the same sample."""
    T = seq_ids.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    same = seq_ids[:, :, None] == seq_ids[:, None, :]
    return causal[None] & same


def forward(cfg, params, input_ids, position_ids, seq_ids):
    """Returns logits [B, T, V] in the dtype of the parameters."""
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // nh
    group = nh // nkv
    eps = cfg["rms_norm_eps"]
    B, T = input_ids.shape
    dtype = params["model.embed_tokens.weight"].dtype

    h = params["model.embed_tokens.weight"][input_ids]               # [B, T, d]
    cos, sin = rope_cos_sin(position_ids, hd, cfg["rope_theta"], dtype)
    cos, sin = cos[:, None], sin[:, None]                            # [B, 1, T, hd]
    allowed = attention_mask(seq_ids)[:, None]                       # [B, 1, T, T]
    kv_of_head = torch.arange(nh) // group                           # query head h -> kv head

    for l in range(L):
        p = f"model.layers.{l}."
        x = rms_norm(h, params[p + "input_layernorm.weight"], eps)
        q = linear(params, x, p + "self_attn.q_proj").view(B, T, nh, hd).transpose(1, 2)
        k = linear(params, x, p + "self_attn.k_proj").view(B, T, nkv, hd).transpose(1, 2)
        v = linear(params, x, p + "self_attn.v_proj").view(B, T, nkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k[:, kv_of_head]                                         # [B, nh, T, hd]
        v = v[:, kv_of_head]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)           # [B, nh, T, T]
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        attn = (probs @ v).transpose(1, 2).reshape(B, T, nh * hd)
        h = h + linear(params, attn, p + "self_attn.o_proj")

        x = rms_norm(h, params[p + "post_attention_layernorm.weight"], eps)
        gate = x @ params[p + "mlp.gate_proj.weight"].T
        up = x @ params[p + "mlp.up_proj.weight"].T
        h = h + (F.silu(gate) * up) @ params[p + "mlp.down_proj.weight"].T

    h = rms_norm(h, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else params["lm_head.weight"]
    return h @ head.T


def loss_fn(cfg, params, batch):
    logits = forward(cfg, params, batch["input_ids"], batch["position_ids"], batch["seq_ids"])
    targets = batch["targets"]
    n = int((targets != IGNORE).sum())
    total = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                            ignore_index=IGNORE, reduction="sum")
    return total / n, logits, n


# --------------------------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------------------------

def naive_logits(cfg, params, input_ids, position_ids, seq_ids):
    """A second, loop-based float64 numpy forward written independently of forward():
    RoPE as explicit (i, i + hd/2) pair rotations, attention one query at a time, the
    kv-head mapping as h // (n_heads / n_kv). Used only to cross-check forward()."""
    P = {k: v.detach().double().numpy() for k, v in params.items()}
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, half = d // nh, d // nh // 2
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    ids, pos, sid = input_ids.numpy(), position_ids.numpy(), seq_ids.numpy()
    B, T = ids.shape

    def norm(x, w):
        return w * x / np.sqrt(np.mean(x * x) + eps)

    def rope(x, p):
        out = np.empty_like(x)
        for i in range(half):
            a = p * theta ** (-2.0 * i / hd)
            c, s = math.cos(a), math.sin(a)
            out[i] = x[i] * c - x[i + half] * s
            out[i + half] = x[i + half] * c + x[i] * s
        return out

    logits = np.zeros((B, T, cfg["vocab_size"]))
    for b in range(B):
        h = np.stack([P["model.embed_tokens.weight"][ids[b, t]] for t in range(T)])
        for l in range(L):
            p = f"model.layers.{l}."
            x = np.stack([norm(h[t], P[p + "input_layernorm.weight"]) for t in range(T)])
            q, k, v = (x @ P[p + f"self_attn.{n}_proj.weight"].T for n in "qkv")
            if qkv_bias(cfg):  # one row per token: add the bias to each
                q, k, v = (m + P[p + f"self_attn.{n}_proj.bias"][None, :] for m, n in zip((q, k, v), "qkv"))
            attn = np.zeros((T, nh * hd))
            for head in range(nh):
                g = head // (nh // nkv)
                for i in range(T):
                    qi = rope(q[i, head * hd:(head + 1) * hd], pos[b, i])
                    keys = [j for j in range(i + 1) if sid[b, j] == sid[b, i]]
                    s = np.array([qi @ rope(k[j, g * hd:(g + 1) * hd], pos[b, j]) for j in keys])
                    s = np.exp(s / math.sqrt(hd) - (s / math.sqrt(hd)).max())
                    s /= s.sum()
                    attn[i, head * hd:(head + 1) * hd] = sum(
                        w * v[j, g * hd:(g + 1) * hd] for w, j in zip(s, keys))
            h = h + attn @ P[p + "self_attn.o_proj.weight"].T
            if o_bias(cfg):
                h = h + P[p + "self_attn.o_proj.bias"][None, :]
            x = np.stack([norm(h[t], P[p + "post_attention_layernorm.weight"]) for t in range(T)])
            gate, up = x @ P[p + "mlp.gate_proj.weight"].T, x @ P[p + "mlp.up_proj.weight"].T
            h = h + (gate / (1.0 + np.exp(-gate)) * up) @ P[p + "mlp.down_proj.weight"].T
        head_w = P["model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"]
        for t in range(T):
            logits[b, t] = norm(h[t], P["model.norm.weight"]) @ head_w.T
    return logits


def self_check(name, cfg, params32, grads32, loss32, batch, gen):
    params64 = {k: v.detach().double().requires_grad_(True) for k, v in params32.items()}
    loss64, _, _ = loss_fn(cfg, params64, batch)
    loss64.backward()
    grads64 = {k: v.grad.detach().clone() for k, v in params64.items()}

    # 1. fp32 run vs float64 run of the same model.
    assert abs(loss32 - loss64.item()) <= 1e-5 * abs(loss64.item()), (name, loss32, loss64.item())
    for k in params32:
        g32, g64 = grads32[k].double(), grads64[k]
        err = (g32 - g64).abs().max().item()
        scale = g64.abs().max().item()
        assert err <= 1e-4 * scale + 1e-7, (name, k, err, scale)

    # 2. forward() against the independent loop-based implementation.
    with torch.no_grad():
        ref = forward(cfg, params64, batch["input_ids"], batch["position_ids"], batch["seq_ids"])
    naive = naive_logits(cfg, params64, batch["input_ids"], batch["position_ids"], batch["seq_ids"])
    err = np.abs(ref.numpy() - naive).max()
    assert err <= 1e-10, (name, "naive forward mismatch", err)

    # 3. Packing: each packed sample gives the same logits as when run alone in its own row.
    for b in range(batch["seq_ids"].shape[0]):
        sids = batch["seq_ids"][b]
        for s_id in sids.unique().tolist():
            cols = (sids == s_id).nonzero().view(-1)
            with torch.no_grad():
                alone = forward(cfg, params64, batch["input_ids"][b:b + 1, cols],
                                batch["position_ids"][b:b + 1, cols],
                                torch.zeros(1, len(cols), dtype=torch.int64))
            err = (alone[0] - ref[b, cols]).abs().max().item()
            assert err <= 1e-10, (name, "packing mismatch", b, s_id, err)

    # 4. Central finite differences of the float64 loss vs float64 autograd.
    def loss_at(k, idx, delta):
        p = {n: v.detach() for n, v in params64.items()}
        w = p[k].clone()
        w.view(-1)[idx] += delta
        p[k] = w
        with torch.no_grad():
            return loss_fn(cfg, p, batch)[0].item()

    checked = ["model.layers.0.self_attn.q_proj.weight",
               "model.layers.1.self_attn.k_proj.weight",
               "model.layers.0.mlp.down_proj.weight",
               "model.layers.1.post_attention_layernorm.weight",
               "model.embed_tokens.weight"]
    if qkv_bias(cfg):
        checked += ["model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.k_proj.bias",
                    "model.layers.0.self_attn.v_proj.bias"]
    if o_bias(cfg):
        checked += ["model.layers.1.self_attn.o_proj.bias"]
    h = 1e-5
    report = []
    for k in checked:
        numel = params64[k].numel()
        if k == "model.embed_tokens.weight":
            # An entry of a row that is looked up (and, when tied, also used by the head).
            tok = int(batch["input_ids"][0, 0])
            col = int(torch.randint(0, cfg["hidden_size"], (1,), generator=gen))
            idx = tok * cfg["hidden_size"] + col
        else:
            idx = int(torch.randint(0, numel, (1,), generator=gen))
        fd = (loss_at(k, idx, h) - loss_at(k, idx, -h)) / (2 * h)
        ag = grads64[k].view(-1)[idx].item()
        assert abs(fd - ag) <= 1e-6 * abs(ag) + 1e-9, (name, k, idx, fd, ag)
        report.append(f"{k}[{idx}] fd={fd:.10e} autograd={ag:.10e}")
    return loss64.item(), report


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------

def shifted_targets(input_ids, next_ids, seq_ids, masked):
    """targets[b, t] = input_ids[b, t+1] inside one packed sample; -100 at each sample's last
    token (next_ids supplies the token after a row's end when the sample continues) and at
    the positions in `masked` (a prompt that takes no loss)."""
    B, T = input_ids.shape
    targets = torch.full((B, T), IGNORE, dtype=torch.int64)
    for b in range(B):
        for t in range(T):
            if t + 1 < T and seq_ids[b, t + 1] == seq_ids[b, t]:
                targets[b, t] = input_ids[b, t + 1]
            elif t + 1 == T and next_ids[b] is not None:
                targets[b, t] = next_ids[b]
    for b, t in masked:
        targets[b, t] = IGNORE
    return targets


def make_batch(name, cfg, gen):
    B, T, V = 2, 7, cfg["vocab_size"]
    input_ids = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    extra = torch.randint(0, V, (B,), generator=gen, dtype=torch.int64)
    if name == "tiny_gqa_untied":
        # Row 0: one sample, first two tokens are prompt (no loss), last token ends the sample.
        # Row 1: one sample truncated by the row end: every position has a target.
        seq_ids = torch.zeros(B, T, dtype=torch.int64)
        position_ids = torch.arange(T).repeat(B, 1)
        targets = shifted_targets(input_ids, seq_ids=seq_ids, next_ids=[None, int(extra[1])],
                                  masked=[(0, 0), (0, 1)])
    elif name == "tiny_qwen2_bias":
        # Row 0 packs three samples (positions restart at each); the last one continues past the
        # row end. Row 1: a 2-token prompt, then a sample that ends at the row's last token.
        seq_ids = torch.tensor([[0, 0, 1, 1, 1, 2, 2],
                                [0, 0, 0, 0, 0, 0, 0]], dtype=torch.int64)
        position_ids = torch.tensor([[0, 1, 0, 1, 2, 0, 1],
                                     [0, 1, 2, 3, 4, 5, 6]], dtype=torch.int64)
        targets = shifted_targets(input_ids, seq_ids=seq_ids, next_ids=[int(extra[0]), None],
                                  masked=[(1, 0), (1, 1)])
    else:
        # Row 0: two packed samples (positions restart), each ends inside the row.
        # Row 1: one sample, first token is prompt, truncated by the row end.
        seq_ids = torch.tensor([[0, 0, 0, 0, 1, 1, 1],
                                [0, 0, 0, 0, 0, 0, 0]], dtype=torch.int64)
        position_ids = torch.tensor([[0, 1, 2, 3, 0, 1, 2],
                                     [0, 1, 2, 3, 4, 5, 6]], dtype=torch.int64)
        targets = shifted_targets(input_ids, seq_ids=seq_ids, next_ids=[None, int(extra[1])],
                                  masked=[(1, 0)])
    return {"input_ids": input_ids, "position_ids": position_ids,
            "seq_ids": seq_ids, "targets": targets}


def to_json(doc):
    """Indented JSON with every list of numbers and every tensor entry kept on one line."""
    def enc(v, ind):
        pad, inner = " " * ind, " " * (ind + 1)
        if isinstance(v, dict) and not (v.keys() >= {"name", "kind", "shape", "offset"}):
            items = [f"{inner}{json.dumps(k)}: {enc(x, ind + 1)}" for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return "[\n" + ",\n".join(inner + enc(x, ind + 1) for x in v) + "\n" + pad + "]"
        return json.dumps(v, separators=(", ", ": "))
    return enc(doc, 0) + "\n"


CONFIGS = {
    "tiny_gqa_untied": dict(seed=20240601, config=dict(
        vocab_size=37, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=48, rope_theta=10000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False, max_position_embeddings=64)),
    "tiny_mha_tied": dict(seed=20240602, config=dict(
        vocab_size=41, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
        num_key_value_heads=3, intermediate_size=40, rope_theta=500000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, max_position_embeddings=64)),
    # Qwen2ForCausalLM: biases on q/k/v only (o_proj has none), grouped-query attention, untied.
    "tiny_qwen2_bias": dict(seed=20240603, config=dict(
        vocab_size=31, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=40, rope_theta=1000000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=False, max_position_embeddings=64, qkv_bias=True, o_bias=False)),
    # LlamaForCausalLM with attention_bias=True: biases on q/k/v and o; one kv head (MQA), tied.
    "tiny_llama_attn_bias": dict(seed=20240604, config=dict(
        vocab_size=29, hidden_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, intermediate_size=36, rope_theta=10000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True, max_position_embeddings=64, qkv_bias=True, o_bias=True)),
}


def build(name, seed, cfg):
    assert cfg["hidden_size"] % cfg["num_attention_heads"] == 0
    assert cfg["num_attention_heads"] % cfg["num_key_value_heads"] == 0
    gen = torch.Generator().manual_seed(seed)
    params = init_params(cfg, gen)
    batch = make_batch(name, cfg, gen)

    for p in params.values():
        p.requires_grad_(True)
    loss, logits, n = loss_fn(cfg, params, batch)
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in params.items()}
    loss32 = loss.item()
    assert math.isfinite(loss32) and n > 0

    loss64, report = self_check(name, cfg, params, grads, loss32, batch, gen)

    tensors, chunks, offset = [], [], 0

    def add(tname, kind, t):
        nonlocal offset
        a = t.detach().to(torch.float32).contiguous().numpy().astype("<f4", copy=False)
        tensors.append({"name": tname, "kind": kind, "shape": list(t.shape), "offset": offset})
        chunks.append(a.reshape(-1))
        offset += a.size

    for pname, _, _ in param_specs(cfg):
        add(pname, "weight", params[pname])
        add(pname, "grad", grads[pname])
    add("logits.row0", "logits", logits[0])

    B, T = batch["input_ids"].shape
    flat = lambda t: [int(x) for x in t.reshape(-1).tolist()]
    doc = {
        "config": cfg,
        "batch": {"batch": B, "seq": T,
                  "input_ids": flat(batch["input_ids"]),
                  "position_ids": flat(batch["position_ids"]),
                  "seq_ids": flat(batch["seq_ids"]),
                  "targets": flat(batch["targets"])},
        "loss": loss32,
        "loss_float64": loss64,
        "num_targets": n,
        "seed": seed,
        "dtype": "float32",
        "tensors": tensors,
    }
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        f.write(to_json(doc))
    with open(os.path.join(HERE, name + ".bin"), "wb") as f:
        f.write(np.concatenate(chunks).astype("<f4").tobytes())

    print(f"{name}: loss={loss32!r} (float64 {loss64!r}) num_targets={n} "
          f"floats={offset} bytes={4 * offset}")
    for line in report:
        print("  fd check ok:", line)


def main(names):
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        sys.exit(f"unknown fixture(s) {unknown}; known: {list(CONFIGS)}")
    for name, spec in CONFIGS.items():
        if not names or name in names:
            build(name, spec["seed"], spec["config"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
