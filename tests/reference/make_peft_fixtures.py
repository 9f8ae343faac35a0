#!/usr/bin/env python3
"""LoRA fine-tuning ground truth made with PEFT, for shardft's LoRA adapters.

Writes tests/reference/peft/<case>/ for each case below:
  adapter_init/            PeftModel.save_pretrained of the initial adapter (adapter_config.json and
                           adapter_model.safetensors; PEFT's model card README.md is dropped)
  grads_step1.safetensors  the fp32 gradient of step 1's loss w.r.t. every lora_A / lora_B tensor,
                           under the names adapter_model.safetensors uses
  adapter_after/           save_pretrained of the adapter after 3 optimizer steps
  expected.json            base, batch key, LoRA and optimizer settings, the 3 losses, the scale

Training, exactly what the engine has to reproduce: the base of tests/reference/hf/ (made by
make_hf_models.py, not regenerated here) loaded in fp32 and frozen; get_peft_model with the case's
LoraConfig after torch.manual_seed(seed) (A: PEFT's Kaiming-uniform init); in every case but
llama_peft_init each lora_B then drawn from normal(0, 0.02) (torch.Generator seeded seed + 1, the
parameters in named_parameters() order) so that A's gradients are not zero; the whole batch
hf/batch.json[<base>] as one micro-batch; loss = transformers' causal-LM loss (mean over the shifted
labels that are not -100); torch.optim.AdamW over all LoRA parameters (lr 1e-3, betas 0.9 / 0.999,
eps 1e-8, weight decay 0.01 on every one of them), constant lr, no clipping; 3 steps on the same batch,
losses[i] taken before update i + 1.

Each case is checked as it is written (a failing check stops the script with an assertion, leaving
that folder half made):
  1. PEFT reloads adapter_init (check_peft_adapter.check: every tensor placed, values equal) and gives
     losses[0]; it reloads adapter_after and gives loss_after, merged or not, and a merged model saved
     with save_pretrained and reloaded with transformers gives it too;
  2. a float64 rerun from adapter_init: its loss matches losses[0], its gradients match the fp32 ones;
  3. for every LoRA module, from the float64 run's module input X and output gradient dY, the output
     W X + b + s B A X and the gradients dA = s (dY B)^T X, dB = s dY^T (X A^T), written out by hand with
     s = alpha / r (alpha / sqrt(r) with rslora), match PEFT's forward and autograd;
  4. central finite differences of the float64 loss for entries of one A and one B match autograd;
  5. with PEFT's own init (B = 0) losses[0] is hf/batch.json's loss of the base model;
  6. the parameters after step 1 match AdamW's first step written out by hand,
     p (1 - lr wd) - lr g / (|g| + eps).

Deterministic: single-threaded, fixed seeds, target_modules saved sorted (PEFT keeps "all-linear"'s
expansion as a set, whose order would follow the string hash seed); a rerun rewrites the same bytes.

  .cache/hfvenv/bin/python tests/reference/make_peft_fixtures.py [CASE ...]
(the venv of jobs/install-test-deps.sh: torch 1.13, transformers 4.46.3, peft 0.13.2).
"""

import contextlib
import json
import math
import os
import shutil
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check_peft_adapter as cpa  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRMSNorm  # noqa: E402
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm  # noqa: E402

OUT = os.path.join(HERE, "peft")
STEPS = 3
OPTIMIZER = {"name": "adamw_torch", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
B_STD = 0.02

CASES = {
    "llama_all_linear": dict(base="tiny_llama", r=8, alpha=16, targets="all-linear", rslora=False,
                             random_b=True, seed=31),
    "llama_rslora_qv": dict(base="tiny_llama", r=4, alpha=8, targets=["q_proj", "v_proj"], rslora=True,
                            random_b=True, seed=32),
    "qwen2_all_linear": dict(base="tiny_qwen2", r=8, alpha=16, targets="all-linear", rslora=False,
                             random_b=True, seed=33),
    "llama_peft_init": dict(base="tiny_llama", r=8, alpha=16, targets="all-linear", rslora=False,
                            random_b=False, seed=34),
}

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def base_dir(case):
    return os.path.join(HERE, "hf", case["base"])


def save_adapter(model, out_dir, base_rel):
    model.peft_config[cpa.ADAPTER_NAME].base_model_name_or_path = base_rel  # not this checkout's path
    model.save_pretrained(out_dir)
    os.remove(os.path.join(out_dir, "README.md"))


def lora_params(model):
    return {cpa.saved_name(n): p for n, p in model.named_parameters() if ".lora_" in n}


def lora_modules(model):
    """name -> PEFT LoRA Linear wrapper (has base_layer, lora_A, lora_B, scaling)."""
    return {n: m for n, m in model.named_modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer")}


def rel_err(a, b):
    scale = max(b.abs().max().item(), 1e-30)
    return (a.double() - b.double()).abs().max().item() / scale


def causal_lm_loss(model, batch):
    """transformers' causal-LM loss without its fp32 upcast of the logits (which would make a float64
    run a float32 one at the head): mean CE of logits[:, t] against labels[:, t + 1], -100 ignored."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                             batch["labels"][:, 1:].reshape(-1), ignore_index=-100)


def rms_norm_float64(self, hidden_states):
    """Llama / Qwen2 RMSNorm.forward without its float32 round trip when the input is float64."""
    if hidden_states.dtype != torch.float64:
        return self._fp32_forward(hidden_states)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


@contextlib.contextmanager
def true_float64():
    """transformers 4.46 takes the eager attention's softmax and RMSNorm in float32 whatever the input
    dtype; under this a float64 input stays float64 there, so that the float64 run is float64
    throughout (finite differences would see those float32 roundings as noise of 1e-8 in the loss).
    RoPE's cos / sin stay float32-computed: they are constants of the parameters."""
    softmax = torch.nn.functional.softmax

    def wide_softmax(x, dim=None, _stacklevel=3, dtype=None):
        if x.dtype == torch.float64 and dtype == torch.float32:
            dtype = torch.float64
        return softmax(x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    norms = (LlamaRMSNorm, Qwen2RMSNorm)
    torch.nn.functional.softmax = wide_softmax
    for cls in norms:
        cls._fp32_forward, cls.forward = cls.forward, rms_norm_float64
    try:
        yield
    finally:
        torch.nn.functional.softmax = softmax
        for cls in norms:
            cls.forward = cls._fp32_forward
            del cls._fp32_forward


def check_float64(case, init_dir, batch, loss32, grads32, scale):
    """Checks 2-4: float64 rerun, hand-written LoRA forward / gradients, finite differences."""
    model = PeftModel.from_pretrained(cpa.load_base(base_dir(case), torch.float64), init_dir,
                                      is_trainable=True)
    model.train()
    captured = {}

    def hook(name):
        def fwd(module, inputs, output):
            captured[name] = {"x": inputs[0].detach(), "y": output.detach()}
            output.register_hook(lambda g: captured[name].__setitem__("dy", g.detach()))
        return fwd

    modules = lora_modules(model)
    handles = [m.register_forward_hook(hook(n)) for n, m in modules.items()]
    loss = causal_lm_loss(model, batch)
    assert loss.dtype == torch.float64
    loss.backward()
    for h in handles:
        h.remove()
    stats = {"loss_float64": loss.item()}
    assert abs(loss.item() - loss32) <= 1e-5 * abs(loss.item()), (loss.item(), loss32)

    params = lora_params(model)
    stats["grad_fp32_vs_fp64"] = max(rel_err(grads32[n], p.grad) for n, p in params.items())
    assert stats["grad_fp32_vs_fp64"] <= 1e-4, stats

    worst_fwd = worst_grad = 0.0
    for name, m in modules.items():
        assert abs(m.scaling[cpa.ADAPTER_NAME] - scale) <= 1e-15 * scale, (name, m.scaling, scale)
        c = captured[name]
        w, b = m.base_layer.weight, m.base_layer.bias
        a_mat = m.lora_A[cpa.ADAPTER_NAME].weight          # [r, in]
        b_mat = m.lora_B[cpa.ADAPTER_NAME].weight          # [out, r]
        x = c["x"].reshape(-1, c["x"].shape[-1])           # [N, in]
        dy = c["dy"].reshape(-1, c["dy"].shape[-1])        # [N, out]
        with torch.no_grad():
            y = x @ w.T + (0 if b is None else b) + scale * (x @ a_mat.T) @ b_mat.T
            da = scale * (dy @ b_mat).T @ x
            db = scale * dy.T @ (x @ a_mat.T)
        worst_fwd = max(worst_fwd, rel_err(y, c["y"].reshape(y.shape)))
        worst_grad = max(worst_grad, rel_err(a_mat.grad, da) if da.abs().max() > 0 else
                         a_mat.grad.abs().max().item(), rel_err(b_mat.grad, db))
    stats["hand_lora_forward"], stats["hand_lora_grads"] = worst_fwd, worst_grad
    assert worst_fwd <= 1e-12 and worst_grad <= 1e-10, stats

    # Finite differences on one A entry and one B entry of a module in the second layer.
    name = [n for n in modules if ".layers.1." in n][0]
    m = modules[name]
    worst_fd = 0.0
    for p in (m.lora_A[cpa.ADAPTER_NAME].weight, m.lora_B[cpa.ADAPTER_NAME].weight):
        idx = (p.shape[0] // 2, p.shape[1] - 1)
        h = 1e-4  # round-off 1e-16 * loss / h stays far below 1e-6 of the gradient
        with torch.no_grad():
            orig = p[idx].item()
            p[idx] = orig + h
            lp = causal_lm_loss(model, batch).item()
            p[idx] = orig - h
            lm = causal_lm_loss(model, batch).item()
            p[idx] = orig
        fd = (lp - lm) / (2 * h)
        ref = max(abs(p.grad[idx].item()), 1e-3 * p.grad.abs().max().item(), 1e-12)
        worst_fd = max(worst_fd, abs(fd - p.grad[idx].item()) / ref)
    stats["finite_diff"] = worst_fd
    assert worst_fd <= 1e-6, stats
    return stats


def check_adamw_step1(before, grads, after):
    """Check 6 (error relative to each tensor's largest entry): AdamW's first step is p (1 - lr wd) - lr m^ / (sqrt(v^) + eps) with m^ = g, v^ = g^2."""
    lr, wd, eps = OPTIMIZER["lr"], OPTIMIZER["weight_decay"], OPTIMIZER["eps"]
    worst = 0.0
    for n, p0 in before.items():
        g = grads[n].double()
        expect = p0.double() * (1 - lr * wd) - lr * g / (g.abs() + eps)
        # relative to the larger of the tensor's largest entry and lr: a few fp32 ulps (a missing weight
        # decay would show as lr * wd = 1e-5 of it)
        worst = max(worst, (after[n].double() - expect).abs().max().item() / max(p0.abs().max().item(), lr))
    assert worst <= 1e-6, worst
    return worst


def make_case(name, case, batches):
    out_dir = os.path.join(OUT, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    base_rel = "tests/reference/hf/" + case["base"]
    batch = {k: torch.tensor(batches[case["base"]][k]) for k in ("input_ids", "attention_mask", "labels")}
    scale = case["alpha"] / (math.sqrt(case["r"]) if case["rslora"] else case["r"])

    torch.manual_seed(case["seed"])
    config = LoraConfig(r=case["r"], lora_alpha=case["alpha"], target_modules=case["targets"],
                        lora_dropout=0.0, bias="none", use_rslora=case["rslora"])
    model = get_peft_model(cpa.load_base(base_dir(case)), config)
    cfg = model.peft_config[cpa.ADAPTER_NAME]
    cfg.target_modules = sorted(cfg.target_modules)
    params = lora_params(model)
    assert all(p.requires_grad == (".lora_" in n) for n, p in model.named_parameters())
    if case["random_b"]:
        gen = torch.Generator().manual_seed(case["seed"] + 1)
        with torch.no_grad():
            for n, p in params.items():
                if ".lora_B." in n:
                    p.copy_(B_STD * torch.randn(p.shape, generator=gen))
    init_dir = os.path.join(out_dir, "adapter_init")
    save_adapter(model, init_dir, base_rel)

    model.train()
    opt = torch.optim.AdamW(list(params.values()), lr=OPTIMIZER["lr"], betas=tuple(OPTIMIZER["betas"]),
                            eps=OPTIMIZER["eps"], weight_decay=OPTIMIZER["weight_decay"])
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            with torch.no_grad():
                own = causal_lm_loss(model, batch).item()
            assert abs(own - losses[0]) <= 1e-6 * losses[0], (own, losses)
        if step == 0:
            grads = {n: p.grad.detach().clone().contiguous() for n, p in params.items()}
            before = {n: p.detach().clone() for n, p in params.items()}
        opt.step()
        if step == 0:
            adam_err = check_adamw_step1(before, grads, {n: p.detach() for n, p in params.items()})
    model.eval()
    loss_after = cpa.batch_loss(model, batch)
    after_dir = os.path.join(out_dir, "adapter_after")
    save_adapter(model, after_dir, base_rel)
    save_file(grads, os.path.join(out_dir, "grads_step1.safetensors"), metadata={"format": "pt"})

    # Check 1: PEFT reloads both adapters (check_peft_adapter verifies every tensor's name and value).
    saved_after = cpa.adapter_tensors(after_dir)
    assert set(saved_after) == set(params) == set(grads)
    assert all(torch.equal(saved_after[n], p.detach()) for n, p in params.items())
    init = cpa.check(base_dir(case), init_dir, batch)
    assert abs(init["loss"] - losses[0]) <= 1e-6 * losses[0], (init, losses)
    assert abs(init["merged_loss"] - losses[0]) <= 1e-5 * losses[0], (init, losses)
    with tempfile.TemporaryDirectory() as merged_dir:
        merged = PeftModel.from_pretrained(cpa.load_base(base_dir(case)), after_dir).merge_and_unload()
        merged.save_pretrained(merged_dir, safe_serialization=True)
        after = cpa.check(base_dir(case), after_dir, batch, merged_dir)
    assert abs(after["loss"] - loss_after) <= 1e-6 * loss_after, (after, loss_after)
    for k in ("merged_loss", "full_loss"):
        assert abs(after[k] - loss_after) <= 1e-5 * loss_after, (k, after, loss_after)
    assert loss_after < losses[-1] < losses[0], (losses, loss_after)
    if not case["random_b"]:  # B = 0: the adapter starts as the base model
        base_loss = batches[case["base"]]["loss"]
        assert abs(losses[0] - base_loss) <= 1e-6 * base_loss, (losses[0], base_loss)

    with true_float64():
        stats = check_float64(case, init_dir, batch, losses[0], grads, scale)
    stats.update(adamw_step1=adam_err, reload_init=init, reload_after=after)

    expected = {
        "base": "hf/" + case["base"],
        "batch": case["base"],
        "lora": {"r": case["r"], "lora_alpha": case["alpha"], "lora_dropout": 0.0,
                 "target_modules": case["targets"], "use_rslora": case["rslora"]},
        "target_modules_expanded": cfg.target_modules,
        "lora_b_init": f"normal(0, {B_STD})" if case["random_b"] else "peft (zeros)",
        "optimizer": OPTIMIZER,
        "steps": STEPS,
        "losses": losses,
        "loss_after": loss_after,
        "scale": scale,
        "seed": case["seed"],
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    return expected, stats


def main(argv):
    names = argv[1:] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s) {unknown}; cases: {list(CASES)}", file=sys.stderr)
        return 2
    with open(os.path.join(HERE, "hf", "batch.json"), encoding="utf-8") as f:
        batches = json.load(f)
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        expected, stats = make_case(name, CASES[name], batches)
        print(f"{name}: scale {expected['scale']:.6g} losses {expected['losses']} after {expected['loss_after']}")
        print(f"  checks: {json.dumps(stats)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
