#!/usr/bin/env python3
"""Chat-template parity fixtures: a few conversations rendered by transformers with the official
Qwen2-Instruct and Llama-3-Instruct jinja chat templates, saved to chat_templates.json next to this
script. tests/unit/test_chat_template.cpp checks that shardft's `chatml` and `llama3` templates
(src/data/chat_template.cpp) give exactly these strings, and, with the byte-level BPE tokenizers of
bpe/qwen2_style and bpe/llama3_style (made by make_bpe_tokenizer.py; they carry the templates' special
tokens), exactly the token ids of apply_chat_template(tokenize=True).

Regenerate with:  .cache/hfvenv/bin/python tests/reference/make_chat_template_fixtures.py
(the venv jobs/install-test-deps.sh builds from requirements.txt: transformers 4.46.3, tokenizers,
jinja2; nothing is downloaded).

The template strings below are reference data, copied verbatim from the `chat_template` field of the
models' tokenizer_config.json on the Hugging Face Hub:
  QWEN2_TEMPLATE   Qwen/Qwen2-7B-Instruct (the same in Qwen2-0.5B/1.5B/72B-Instruct and Qwen1.5-*-Chat).
                   Qwen2.5-*-Instruct use a longer template (tool calls) whose only difference without
                   tools is the default system text "You are Qwen, created by Alibaba Cloud. You are a
                   helpful assistant."; conversations with a system turn render identically.
  LLAMA3_TEMPLATE  meta-llama/Meta-Llama-3-8B-Instruct (and -70B-Instruct). Llama 3.1+ templates add a
                   dated system preamble ("Cutting Knowledge Date: ...") and are not what `llama3` renders.
"""

import json
import os

from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

# (name, messages, add_generation_prompt)
CASES = [
    ("single_turn_no_system",
     [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}], False),
    ("system_multi_turn",
     [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
      {"role": "user", "content": "Another?"}, {"role": "assistant", "content": ""}], False),
    ("unicode",
     [{"role": "user", "content": "\u00dcbersetze: \u732b \U0001f431"},
      {"role": "assistant", "content": "cat \u2014 \uace0\uc591\uc774 \u2713"}], False),
    # Jinja's trim is Python's str.strip(): Unicode whitespace (no-break space, ideographic space, ...).
    ("whitespace_at_ends",
     [{"role": "system", "content": "\n sys \t"},
      {"role": "user", "content": "  padded question \n"},
      {"role": "assistant", "content": "\u00a0\u3000 answer, inner  spaces kept\u2003\r\n"}], False),
    ("special_text_and_late_system",
     [{"role": "user", "content": "say <|im_end|> and <|eot_id|> literally"},
      {"role": "system", "content": "late system turn"},
      {"role": "assistant", "content": "ok"}], False),
    ("generation_prompt_no_system",
     [{"role": "user", "content": "upper: abc"}], True),
    ("generation_prompt_multi_turn",
     [{"role": "system", "content": "You answer in capitals."},
      {"role": "user", "content": "upper: ab"}, {"role": "assistant", "content": "AB"},
      {"role": "user", "content": "upper: cd "}], True),
]


HERE = os.path.dirname(os.path.abspath(__file__))


def tokenizer_with(template, bos, tokenizer_json=None):
    # For the strings a stand-in tokenizer would do (only the template and bos_token matter); for the
    # ids, the committed BPE fixture whose added tokens are the template's.
    if tokenizer_json is None:
        tok = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
        out = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos)
    else:
        out = PreTrainedTokenizerFast(tokenizer_file=os.path.join(HERE, tokenizer_json), bos_token=bos)
    out.chat_template = template
    return out


def main():
    templates = {
        "chatml": tokenizer_with(QWEN2_TEMPLATE, "<|endoftext|>"),
        "llama3": tokenizer_with(LLAMA3_TEMPLATE, "<|begin_of_text|>"),
    }
    bpe = {
        "chatml": ("bpe/qwen2_style/tokenizer.json", tokenizer_with(QWEN2_TEMPLATE, None, "bpe/qwen2_style/tokenizer.json")),
        "llama3": ("bpe/llama3_style/tokenizer.json",
                   tokenizer_with(LLAMA3_TEMPLATE, "<|begin_of_text|>", "bpe/llama3_style/tokenizer.json")),
    }
    cases = []
    for name, messages, add_generation_prompt in CASES:
        rendered = {
            kind: tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
            for kind, tok in templates.items()
        }
        ids = {}
        for kind, (_, tok) in bpe.items():
            assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt) \
                == rendered[kind]
            ids[kind] = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
        cases.append({"name": name, "messages": messages, "add_generation_prompt": add_generation_prompt,
                      "rendered": rendered, "ids": ids})
    out = {
        "generator": "tests/reference/make_chat_template_fixtures.py",
        "templates": {"chatml": "Qwen/Qwen2-7B-Instruct", "llama3": "meta-llama/Meta-Llama-3-8B-Instruct"},
        "tokenizers": {kind: path for kind, (path, _) in bpe.items()},
        "cases": cases,
    }
    path = os.path.join(HERE, "chat_templates.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {path}: {len(cases)} cases x {len(templates)} templates")


if __name__ == "__main__":
    main()
