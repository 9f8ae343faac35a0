#!/usr/bin/env python3
"""Trains small byte-level BPE tokenizers with Hugging Face `tokenizers` and writes the parity
fixtures the C++ tokenizer (src/tokenizer/bpe_tokenizer.cpp) is tested against.

    /tmp/hfvenv/bin/python tests/reference/make_bpe_tokenizer.py      # any python with tokenizers 0.20

Training text: tests/reference/bpe/corpus.txt (multilingual, emoji, code, whitespace runs) plus the
first conversations of jobs/data/sft_train.jsonl. For each style it writes

    tests/reference/bpe/<style>/tokenizer.json   the tokenizer, as HF saves it (reloaded from that file)
    tests/reference/bpe/<style>/cases.json       test strings with HF's ids (add_special_tokens=False),
                                                 decode(ids) and decode(ids, skip_special_tokens=True)

Styles:
  gpt2_style    ByteLevel pre-tokenizer with the GPT-2 regex, ByteLevel decoder; merges written in the
                legacy "a b" string form.
  llama3_style  Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=false), ignore_merges=true, the
                Llama-3 special tokens after the vocabulary; a few whole words added to the vocab without
                merges so that ignore_merges changes some encodings (those cases also record the ids
                with ignore_merges=false).
  qwen2_style   NFC normalizer, Split(Qwen2 regex, Isolated) + ByteLevel(use_regex=false), the Qwen2
                special tokens <|endoftext|> <|im_start|> <|im_end|>; merges in the [a, b] pair form.
  edge_style    the gpt2_style model with NFC, ByteLevel(add_prefix_space=true) and added tokens with
                lstrip / rstrip / single_word / normalized set, to pin down those behaviours.

Also tests/reference/bpe/pretokens.json: for each of the three regexes, HF's Split(Isolated) pieces (as
UTF-8 byte lengths) of a context string built around each of ~200 probe code points (every White_Space
character, format characters, marks, digits and letters of many scripts, emoji, private use,
unassigned, a stride through all planes). `--all-code-points DIR` instead writes DIR/<regex>.txt with
every code point (1.1M lines each) for the exhaustive ctest case bpe_differential.all-code-points, and
`--random-cases FILE [N] [SEED]` writes N (20000) random strings glued from tricky fragments with the HF ids
and decodes of every fixture tokenizer (these four and make_spm_tokenizer.py's), plus random id sequences
with HF's decodes, for the ctest case bpe_differential.random-cases
(tests/differential/bpe_differential.sh runs both).

Deterministic: rerunning it reproduces the files byte for byte.
"""
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "bpe")

GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Whole words added to the llama3_style vocab without merges (byte-level spelling; Ġ is the space byte).
LLAMA3_EXTRA_WORDS = ["Ġtokenizer", "Ġlanguage", "Ġsentences", "Ġbyte", "Ġpieces", "Ġfibonacci", "Ġunbelievable"]


def training_text():
    with open(os.path.join(OUT, "corpus.txt"), encoding="utf-8", newline="") as f:
        corpus = f.read()
    texts = [corpus] * 3  # weight the multilingual corpus against the (monotone) sft samples
    with open(os.path.join(ROOT, "jobs", "data", "sft_train.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 400:
                break
            conv = json.loads(line)["conversations"]
            texts.append("\n".join(turn["value"] for turn in conv) + "\n")
    return corpus, texts


def train(pre_tokenizer, vocab_size, normalizer=None, special_tokens=(), ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=list(special_tokens))
    _, texts = training_text()
    tok.train_from_iterator(texts, trainer)
    return tok


def common_cases(specials, with_corpus=True):
    """Strings every tokenizer is checked on; `specials` are its special tokens (two at least). With
    `with_corpus`, also every corpus line (line endings kept), the whole corpus and a few sft samples."""
    a, b = specials[0], specials[-1]
    cases = [
        "", " ", "   ", "\n", "\n\n\n", "\t", " \t \n ", "\r\n", "\r\n\r\n", "\v\f\r", "   leading", "trailing   ",
        "  both  ", "word", " word", "  word", "1234567", "12345678901", "a1b22c333d4444", "3.14159 2,718 1e10",
        "Hello世界مرحبا123😀", "naïve café résumé", "\u0301", "e\u0301", "cafe\u0301", "\u1e9b\u0323",
        "\u212b ngstrom", "A\u030a", "\u1100\u1161\u11a8", "ﬁne ﬂow", "x\u0301\u0302\u0303y",
        "'s 'S 'll 'LL 'Ve 're", "don't DON'T y'all", "'ſ 'K", "can't'nt",
        "a\u0085\u0085b", "a\u180e\u180eb", "\u3000\u3000x", "\u00a0 x", "x \u2028y\u2029z", "a\u200bb\ufeffc",
        "a \u00a0 b", "tab\t\tand  spaces \t\n\tmixed",
        " " * 100, "a" * 200, "😀" * 30, "9" * 50, "ab " * 40, "\n" * 20 + "x",
        "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👍🏽👍🏿", "🇩🇪🇫🇷",
        "\ufffd", "\U0010ffff", "\ue000\uf8ff", "\x00\x01\x7f", "\u00ad",
        "中文、日本語、한국어。", "ＡＢＣ１２３", "ǅ ǈ ǋ",
        f"hi{b}there", f"{a}{b}", f"{b}", f" {b} ", f"{b}\n\n", f"text{a} {b}more", f"{a}user\nhello{b}\n",
        f"<|{b[2:]}", b[:-1], b + ">", "<" + b, f"{b}{b}{b}", f"é{b}é", f"  {b}  ", f"{b}\u0301",
    ]
    if with_corpus:
        corpus, texts = training_text()
        cases += corpus.splitlines(keepends=True)
        cases.append(corpus)
        cases += texts[3:13]
    seen, out = set(), []
    for c in cases:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def write(style, tok_json, cases, extra_case_fn=None):
    """Writes tokenizer.json, reloads it from disk, and records HF's behaviour on every case."""
    d = os.path.join(OUT, style)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(tok_json, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    tok = Tokenizer.from_file(path)
    specials = {t.content: i for i, t in tok.get_added_tokens_decoder().items()}
    out_cases = []
    for text in cases:
        enc = tok.encode(text, add_special_tokens=False)
        # decoded / decoded_skip_special are left out when they equal the text (keeps the file small).
        c = {"text": text, "ids": enc.ids}
        decoded = tok.decode(enc.ids, skip_special_tokens=False)
        skipped = tok.decode(enc.ids, skip_special_tokens=True)
        if decoded != text:
            c["decoded"] = decoded
        if skipped != text:
            c["decoded_skip_special"] = skipped
        if extra_case_fn:
            extra_case_fn(text, c)
        out_cases.append(c)
    doc = {"style": style, "generator": "tests/reference/make_bpe_tokenizer.py",
           "vocab_size": tok.get_vocab_size(with_added_tokens=True),
           "added_tokens": dict(sorted(specials.items(), key=lambda kv: kv[1])), "cases": out_cases}
    with open(os.path.join(d, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{style}: vocab {doc['vocab_size']}, {len(tok_json['model']['merges'])} merges, {len(out_cases)} cases")
    return tok, out_cases


def gpt2_style():
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), 1200,
                special_tokens=["<|endoftext|>", "<|pad|>"])
    j = json.loads(tok.to_str())
    j["model"]["merges"] = [f"{x} {y}" for x, y in j["model"]["merges"]]  # legacy form
    tok2, cases = write("gpt2_style", j, common_cases(["<|endoftext|>", "<|pad|>"]))
    for c in cases:  # byte-level with no normalizer: lossless
        assert "decoded" not in c, c
    return j


def llama3_style():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = train(pre, 1600, ignore_merges=True)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    for w in LLAMA3_EXTRA_WORDS:
        if w not in vocab:
            vocab[w] = len(vocab)
    assert j["model"]["ignore_merges"] is True
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in LLAMA3_SPECIALS])
    j = json.loads(tok.to_str())
    j["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [vocab_id(j, "<|begin_of_text|>")],
                                                  "tokens": ["<|begin_of_text|>"]}}}]}
    no_ignore = json.loads(json.dumps(j))
    no_ignore["model"]["ignore_merges"] = False
    plain = Tokenizer.from_str(json.dumps(no_ignore))
    differing = []

    def record_plain(text, c):
        ids = plain.encode(text, add_special_tokens=False).ids
        if ids != c["ids"]:
            c["ids_without_ignore_merges"] = ids
            differing.append(text)

    cases = common_cases(LLAMA3_SPECIALS)
    cases += ["the tokenizer", "a tokenizer's byte pieces", " unbelievable", "unbelievable", " fibonacci(n)"]
    _, out = write("llama3_style", j, cases, record_plain)
    assert len(differing) >= 5, differing  # ignore_merges must matter for this fixture
    for c in out:
        assert "decoded" not in c, c
    print(f"  ignore_merges changes {len(differing)} cases")


def vocab_id(j, content):
    for t in j["added_tokens"]:
        if t["content"] == content:
            return t["id"]
    return j["model"]["vocab"][content]


def qwen2_style():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok = train(pre, 1500, normalizer=normalizers.NFC())
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in QWEN2_SPECIALS])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    j = json.loads(tok.to_str())
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    cases = common_cases(QWEN2_SPECIALS)
    _, out = write("qwen2_style", j, cases)
    import unicodedata
    for c in out:
        if unicodedata.normalize("NFC", c["text"]) == c["text"]:
            assert "decoded" not in c, c


def edge_style(gpt2_json):
    """Same vocab and merges as gpt2_style (so no extra training), other settings switched on."""
    j = json.loads(json.dumps(gpt2_json))
    j["normalizer"] = {"type": "NFC"}
    j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    # Only a few hundred merges: a smaller file, and more words fall apart into bytes.
    j["model"]["merges"] = j["model"]["merges"][:300]
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([
        AddedToken("<L>", special=True, lstrip=True),
        AddedToken("<R>", special=True, rstrip=True),
        AddedToken("<LR>", special=True, lstrip=True, rstrip=True, normalized=False),
    ])
    tok.add_tokens([
        AddedToken("sw", special=False, single_word=True),
        AddedToken("café", special=False, normalized=True),   # matched after NFC: "cafe\u0301" hits it
        AddedToken("Ġx", special=False),                       # decodes through the ByteLevel decoder
        AddedToken(" hé", special=False, normalized=False),    # has a space: decoded as raw UTF-8
        AddedToken("<tag", special=False, normalized=False),   # a prefix of nothing, overlaps "<tag>"
        AddedToken("<tag>", special=False, normalized=False),
    ])
    j = json.loads(tok.to_str())
    cases = common_cases(["<L>", "<R>", "<LR>"], with_corpus=False)
    cases += [
        "hi<L>there", "a  <L>  b", "a  <R>  b", "a \t<LR>\n b", "<L><L>", "a<R> <L>b", "x<L>", "<R>",
        "a\u3000<L>", "é\u3000 <L>", "<R>\u3000\u3000é", "<R>\u3000 x", "\n<LR>\n",
        "sw", "a sw b", "asw b", "sw_", "sw.", "éswé", "\u0301sw", "sw\u0301", "٣sw", "_sw", "sw sw", "swsw", "(sw)",
        "café", "cafe\u0301", "un cafe\u0301 noir", "cafe\u0301<R> café", "Ġx", "aĠxb", " hé", "a hé b", "he\u0301",
        "<tag", "<tag>", "<tag>>", "<<tag>", "<ta", "ab<tag<tag>",
    ]
    write("edge_style", j, cases)


REGEXES = {"gpt2": GPT2_REGEX, "llama3": LLAMA3_REGEX, "qwen2": QWEN2_REGEX}
PROBE_CONTEXT = "a{c}{c}b {c}1 {c}\n{c}'{c}x{c} "


def probe_code_points():
    cps = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
    cps |= set(range(0x2000, 0x200B))  # White_Space, all of it
    cps |= {0x180E, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00, 0x1C, 0x1F, 0x7F, 0x80, 0x9F, 0xAD}
    cps |= {ord(c) for c in "Az\u017f\u212a\u00df\u0130\u01c5\u2160\u00b2\u00bd\u0660\u0966\uff11\u3007\u16ee"}
    cps |= {0x1D7CE, 0x301, 0x903, 0x20DD, 0x1AB0, 0x4E00, 0x3042, 0xAC00, 0x1100, 0x20000, 0x30000, 0x31350}
    cps |= {0x1F600, 0x1F3FD, 0x2764, 0xFE0F, 0x1F1E9, 0xE000, 0xF0000, 0x10FFFD, 0xFFFE, 0xFFFF, 0x10FFFF}
    cps |= {0x378, 0xE0001, 0x3001, 0x60C} | {ord(c) for c in "$+^`\u00a9\u20ac\u2192'\".-_(#"}
    cps |= {c for c in range(0, 0x110000, 9973) if not 0xD800 <= c <= 0xDFFF}
    return sorted(cps)


def split_lengths(split, text):
    return [len(p.encode("utf-8")) for p, _ in split.pre_tokenize_str(text)]


def pretokens():
    probes = probe_code_points()
    doc = {"generator": "tests/reference/make_bpe_tokenizer.py", "context": PROBE_CONTEXT, "regexes": REGEXES,
           "code_points": probes, "lengths": {}}
    for name, regex in REGEXES.items():
        split = pre_tokenizers.Split(Regex(regex), behavior="isolated")
        doc["lengths"][name] = [split_lengths(split, PROBE_CONTEXT.format(c=chr(cp))) for cp in probes]
    with open(os.path.join(OUT, "pretokens.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"pretokens: {len(probes)} code points x {len(REGEXES)} regexes")


def all_code_points(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, regex in REGEXES.items():
        split = pre_tokenizers.Split(Regex(regex), behavior="isolated")
        with open(os.path.join(out_dir, f"{name}.txt"), "w", encoding="ascii") as f:
            for cp in range(0x110000):
                if 0xD800 <= cp <= 0xDFFF:
                    continue
                lens = split_lengths(split, PROBE_CONTEXT.format(c=chr(cp)))
                f.write(f"{cp} {' '.join(map(str, lens))}\n")
        print(f"{out_dir}/{name}.txt")


RANDOM_FRAGMENTS = [
    "a", "b", "Z", "the", "The", "tokenizer", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\v", "\f", "\u00a0",
    "\u3000", "\u0085", "\u180e", "\u2028", "\u200b", "\ufeff", "0", "7", "123", "4567", "'s", "'S", "'ll", "'LL",
    "'ve", "'d", "'m", "'t", "'re", "'", "\u017f", "!", "?", "...", "-", "_", "(", ")", "\"", ",", ".", "\u00e9",
    "e\u0301", "\u0301", "\u0308", "\u00df", "\u00fc", "\u00c5", "A\u030a", "\u212b", "\ufb01", "\u65e5", "\u672c",
    "\u8a9e", "\ud55c", "\u1100\u1161", "\u0645", "\u0631", "\u0663", "\U0001f600", "\U0001f44d\U0001f3fd",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1e9\U0001f1ea", "\x00", "\x01",
    "<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>", "<|begin_of_text|>", "<|pad|>", "<|im", "|>", "<",
    "<L>", "<R>", "<LR>", "sw", "caf\u00e9", "cafe\u0301", "\u0120x", " h\u00e9", "<tag", "<tag>", "h\u00e9", "x",
    "\u0120", "\u010b",
    # SentencePiece-style fixtures (make_spm_tokenizer.py): the metaspace, byte tokens, Llama specials,
    # characters outside their alphabet (byte fallback), control characters.
    "\u2581", "\u2581\u2581", "<0x41>", "<s>", "</s>", "<unk>", "<|end|>", "<|user|>", "\u4e2d\u6587",
    "\u0e44\u0e17\u0e22", "\x1b[0m", "\x07", "\x7f", "\U0001f389", "\U0001f9ea", "    ", " \n"]


STYLES = ["gpt2_style", "llama3_style", "qwen2_style", "edge_style",
          "llama2_legacy_style", "llama2_metaspace_style", "spm_edge_style", "spm_never_style"]


def random_ids(tok, rng, n):
    """n random id sequences for decode: any id (a few past the vocabulary, which HF skips), and runs of
    byte-fallback tokens <0xNN> that are often not valid UTF-8."""
    size = tok.get_vocab_size(with_added_tokens=True)
    seqs = [[rng.randrange(size + 3) for _ in range(rng.randint(0, 16))] for _ in range(n)]
    byte_ids = sorted(i for t, i in tok.get_vocab(with_added_tokens=False).items() if t.startswith("<0x"))
    if byte_ids:
        pool = byte_ids + list(range(size))[:300]
        seqs += [[rng.choice(byte_ids if rng.random() < 0.7 else pool) for _ in range(rng.randint(1, 10))]
                 for _ in range(n)]
    return seqs


def random_cases(path, n, seed):
    import random
    rng = random.Random(seed)
    texts = ["".join(rng.choice(RANDOM_FRAGMENTS) for _ in range(rng.randint(0, 25))) for _ in range(n)]
    out = {"generator": "tests/reference/make_bpe_tokenizer.py --random-cases", "seed": seed, "texts": texts}
    for style in STYLES:
        tok = Tokenizer.from_file(os.path.join(OUT, style, "tokenizer.json"))
        ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
        rids = random_ids(tok, rng, max(1, n // 10))
        out[style] = {"ids": ids, "decoded": tok.decode_batch(ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode_batch(ids, skip_special_tokens=True),
                      "random_ids": rids, "random_ids_decoded": tok.decode_batch(rids, skip_special_tokens=False),
                      "random_ids_decoded_skip_special": tok.decode_batch(rids, skip_special_tokens=True)}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"{path}: {n} strings x {len(STYLES)} tokenizers")


def main():
    assert sys.version_info >= (3, 8)
    if len(sys.argv) >= 3 and sys.argv[1] == "--random-cases":
        random_cases(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20000,
                     int(sys.argv[4]) if len(sys.argv) > 4 else 1)
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--all-code-points":
        all_code_points(sys.argv[2])
        return
    gpt2 = gpt2_style()
    llama3_style()
    qwen2_style()
    edge_style(gpt2)
    pretokens()
    total = 0
    for root, _, files in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"tests/reference/bpe: {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
