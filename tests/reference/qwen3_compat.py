"""Qwen3ForCausalLM for the transformers this project's test venv can run.

transformers added Qwen3 in 4.51, which needs torch >= 2; the test venv runs transformers 4.46.3 on
Debian's torch 1.13 (tests/reference/requirements.txt). register() makes `model_type: qwen3` loadable
there: when transformers has its own Qwen3 it does nothing, else it registers these classes with
AutoConfig / AutoModelForCausalLM.

The math is transformers 4.51's modeling_qwen3 (Qwen3Attention, Qwen3RMSNorm) on 4.46's Llama
building blocks, which are Qwen3's apart from the attention: q_proj/k_proj/v_proj/o_proj with biases
iff attention_bias, an explicit head_dim, and an RMSNorm over each head of q (q_norm) and of k (k_norm),
eps rms_norm_eps, after the projections and before RoPE. Parameter names and config.json keys are
Qwen3's, so the files written here are the files transformers' own Qwen3 reads.
"""

import math

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRMSNorm, apply_rotary_pos_emb, repeat_kv


class Qwen3Config(LlamaConfig):
    model_type = "qwen3"

    def __init__(self, use_sliding_window=False, sliding_window=None, max_window_layers=None, **kwargs):
        kwargs.setdefault("rms_norm_eps", 1e-6)
        kwargs.setdefault("head_dim", 128)
        super().__init__(**kwargs)
        if use_sliding_window:
            raise ValueError("qwen3_compat: use_sliding_window is not implemented")
        self.use_sliding_window = use_sliding_window
        self.sliding_window = sliding_window
        self.max_window_layers = max_window_layers if max_window_layers is not None else self.num_hidden_layers

    def to_dict(self):
        d = super().to_dict()
        for key in ("mlp_bias", "pretraining_tp"):  # Llama's keys, not Qwen3Config's
            d.pop(key, None)
        return d


class Qwen3Attention(LlamaAttention):
    """transformers 4.51 Qwen3Attention.forward, eager attention."""

    def __init__(self, config, layer_idx):
        super().__init__(config, layer_idx)
        self.q_norm = LlamaRMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = LlamaRMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_value=None,
                output_attentions=False, use_cache=False, cache_position=None, position_embeddings=None, **kwargs):
        bsz, q_len, _ = hidden_states.size()
        shape = (bsz, q_len, -1, self.head_dim)
        q = self.q_norm(self.q_proj(hidden_states).view(shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(shape)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings if position_embeddings is not None else self.rotary_emb(v, position_ids)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        if past_key_value is not None:
            k, v = past_key_value.update(k, v, self.layer_idx, {"sin": sin, "cos": cos, "cache_position": cache_position})
        k = repeat_kv(k, self.num_key_value_groups)
        v = repeat_kv(v, self.num_key_value_groups)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            w = w + attention_mask[:, :, :, : k.shape[-2]]
        else:  # sdpa's mask builder leaves a plain causal batch to the kernel's is_causal
            kv_len = k.shape[-2]
            causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=w.device).tril(kv_len - q_len)
            w = w.masked_fill(~causal, torch.finfo(w.dtype).min)
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out), (w if output_attentions else None), past_key_value


class Qwen3ForCausalLM(LlamaForCausalLM):
    config_class = Qwen3Config

    def __init__(self, config):
        super().__init__(config)
        for i, layer in enumerate(self.model.layers):
            layer.self_attn = Qwen3Attention(config, i)
        self.post_init()


def register():
    try:
        from transformers import Qwen3ForCausalLM as _  # noqa: F401
        return  # transformers has its own
    except ImportError:
        pass
    AutoConfig.register("qwen3", Qwen3Config)
    AutoModelForCausalLM.register(Qwen3Config, Qwen3ForCausalLM)
