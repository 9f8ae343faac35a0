#!/usr/bin/env python3
"""Trains a small SentencePiece-style BPE (Unicode characters, byte fallback, the metaspace "▁") with
Hugging Face `tokenizers` and writes it in the tokenizer.json layouts Llama 2, Mistral, TinyLlama and
Phi-3 ship, as parity fixtures for src/tokenizer/bpe_tokenizer.cpp (make_bpe_tokenizer.py does the
byte-level ones; this script reuses its training text, test strings and writer).

    .cache/hfvenv/bin/python tests/reference/make_spm_tokenizer.py

The vocabulary is laid out as sentencepiece's Llama models are: <unk> <s> </s>, then the 256 byte
tokens <0x00>..<0xFF>, then the learned pieces. Only the 120 most frequent characters are in the
alphabet, so CJK, most emoji and control characters go through byte fallback. Deterministic: a rerun
rewrites the files byte for byte.

Styles (tests/reference/bpe/<style>/tokenizer.json + cases.json, as make_bpe_tokenizer.write makes them):
  llama2_legacy_style     what transformers' LlamaConverter writes with legacy=True (Llama 2, Mistral v0.1,
                          TinyLlama, Phi-3): normalizer Sequence[Prepend "▁", Replace " " -> "▁"], no
                          pre-tokenizer, decoder Sequence[Replace "▁" -> " ", ByteFallback, Fuse, Strip(" ", 1,
                          0)], fuse_unk, merges as "a b" strings; plus Phi-3's rstrip special tokens.
  llama2_metaspace_style  LlamaConverter with legacy=False: no normalizer, Metaspace(prepend_scheme "first",
                          split false), the same decoder; merges as [a, b] pairs.
  spm_edge_style          Metaspace(prepend_scheme "always", split true) with the Metaspace decoder, NFC,
                          ignore_merges with whole words added to the vocab, fuse_unk false, the byte tokens
                          of 4-byte UTF-8 leads missing (so emoji become <unk>), 300 merges, added tokens
                          normalized / lstrip / rstrip.
  spm_never_style         spm_edge_style's vocab with Metaspace(prepend_scheme "never", split true), fuse_unk,
                          a Prepend "▁" normalizer and a decoder without Strip.
"""
import collections
import json
import os

from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers

import make_bpe_tokenizer as bpe

SPECIALS = ["<unk>", "<s>", "</s>"]
PHI3_SPECIALS = ["<|user|>", "<|assistant|>", "<|end|>"]
EDGE_WORDS = ["▁tokenizer", "▁language", "▁sentences", "▁unbelievable", "▁fibonacci"]
ALPHABET = 120  # characters; the rest of the corpus (CJK, most emoji, control characters) falls back to bytes
MISSING_BYTES = range(0xF0, 0xF5)  # lead bytes of 4-byte UTF-8: emoji and other astral characters

LLAMA_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
LEGACY_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}

CASES = [
    "", " ", "  ", "▁", "▁▁x", "x▁", " ▁ x", "hello", " hello", "  hello", "hello ", "hello  ", "a  b   c",
    "\n", "hello\nworld", "\n\nhello\n", " \n ", "\t\tx", "a\r\nb",
    "中文字符不在词表里", "日本語のテキスト", "한국어", "😀", "a😀b", "👨\u200d👩\u200d👧", "🇩🇪 flag",
    "\x00", "\x01\x02\x1b[0m", "\x7f", "bell\x07", "\ufffd", "\U0010ffff", "\u00ad", "e\u0301", "cafe\u0301",
    "<0x41>", "<0x41><0x42>", "<unk>", "x<unk>y", "<s>", "</s>", "<s>hello", "<s> hello", "<s>  hello",
    "hello</s>", "hello </s>", "<s>a</s><s>b</s>", "<s><s>", "say <s>hi</s> twice",
    "<|user|>\nhi<|end|>\n<|assistant|>\nhello<|end|>", "<|end|>   x", "x <|end|> \n y",
    "<L>", "a <L> b", "<R>  x", "\u3000<L>\u3000", "▁hello", "the tokenizer", "a tokenizer's language",
    " unbelievable", "unbelievable", "fibonacci(n)", "  sentences  ", "hello▁world", "▁▁▁",
]


def train():
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    _, texts = bpe.training_text()
    # The alphabet is chosen here: HF's limit_alphabet breaks ties between equally frequent characters in
    # hash order, which would make reruns differ.
    counts = collections.Counter(c for t in texts for c in t.replace(" ", "\u2581"))
    alphabet = [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:ALPHABET]]
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False, special_tokens=SPECIALS,
                                  initial_alphabet=alphabet, limit_alphabet=ALPHABET)
    tok.train_from_iterator(texts, trainer)
    learned = json.loads(tok.to_str())["model"]
    # sentencepiece's Llama layout: specials, the 256 byte tokens, then the learned pieces.
    order = SPECIALS + [f"<0x{b:02X}>" for b in range(256)]
    order += [t for t, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]) if t not in SPECIALS]
    return {t: i for i, t in enumerate(order)}, learned["merges"]


def base_json(vocab, merges):
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for s in SPECIALS],
        "normalizer": None, "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]}}},
        "decoder": LLAMA_DECODER,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def cases():
    out, seen = [], set()
    for c in bpe.common_cases(["<s>", "</s>"]) + CASES:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def check_byte_fallback(out):
    """The fixture is only worth something if byte fallback and the metaspace edge cases happen."""
    byte_ids = set(range(3, 259))
    assert sum(1 for c in out if byte_ids & set(c["ids"])) >= 20, "too few strings use byte fallback"


def llama2_legacy(vocab, merges):
    j = base_json(vocab, merges)
    j["normalizer"] = LEGACY_NORMALIZER
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False, rstrip=True) for s in PHI3_SPECIALS])
    j = json.loads(tok.to_str())
    j["model"]["merges"] = [f"{a} {b}" for a, b in merges]  # to_str writes pairs; Llama 2's file has strings
    _, out = bpe.write("llama2_legacy_style", j, cases())
    check_byte_fallback(out)


def llama2_metaspace(vocab, merges):
    j = base_json(vocab, merges)
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    _, out = bpe.write("llama2_metaspace_style", j, cases())
    check_byte_fallback(out)


def edge_json(vocab, merges):
    vocab = {t: i for t, i in vocab.items() if not (t.startswith("<0x") and int(t[3:5], 16) in MISSING_BYTES)}
    order = sorted(vocab, key=vocab.get) + [w for w in EDGE_WORDS if w not in vocab]
    j = base_json({t: i for i, t in enumerate(order)}, merges[:300])
    j["model"].update(ignore_merges=True, fuse_unk=False)
    return j


def add_edge_tokens(j):
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken("<L>", special=True, lstrip=True, normalized=False),
                            AddedToken("<R>", special=True, rstrip=True, normalized=True)])
    tok.add_tokens([AddedToken("café", special=False, normalized=True),
                    AddedToken("▁x", special=False, normalized=False)])
    return json.loads(tok.to_str())


def spm_edge(vocab, merges):
    j = edge_json(vocab, merges)
    j["normalizer"] = {"type": "NFC"}
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    j["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    _, out = bpe.write("spm_edge_style", add_edge_tokens(j), cases())
    assert any(vocab["<unk>"] in c["ids"] for c in out), "no string hits <unk>"


def spm_never(vocab, merges):
    j = edge_json(vocab, merges)
    j["model"].update(ignore_merges=False, fuse_unk=True)
    j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}]}
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}
    j["decoder"] = {"type": "Sequence", "decoders": LLAMA_DECODER["decoders"][:3]}
    bpe.write("spm_never_style", add_edge_tokens(j), cases())


def main():
    vocab, merges = train()
    llama2_legacy(vocab, merges)
    llama2_metaspace(vocab, merges)
    spm_edge(vocab, merges)
    spm_never(vocab, merges)


if __name__ == "__main__":
    os.chdir(bpe.ROOT)
    main()
