#!/usr/bin/env python3
"""Regenerate the bundled dataset (from the repo root): python3 jobs/data/make_synthetic_sft.py [--task reverse]

Synthetic SFT data for smoke-training and testing shardft: one-turn conversations that ask for a
simple transformation of a random lowercase string, e.g.

    {"conversations":[{"from":"human","value":"upper: kqzt"},{"from":"gpt","value":"KQZT"}]}

Tasks: upper (KQZT), reverse (tzqk), sort (kqtz), copy (kqzt), and lower, whose prompt shows the
string upper-cased ("lower: KQZT" -> kqzt). --mix upper,reverse,... interleaves several tasks. The output is a pure function of the arguments (Python's random.Random with a fixed
seed), so regenerating with the same flags reproduces the files byte for byte.

Eval strings are held out: no string used in sft_eval.jsonl appears in sft_train.jsonl under any
task, so eval accuracy measures generalisation rather than memorisation.

Writes <out-dir>/sft_train.jsonl and <out-dir>/sft_eval.jsonl (out-dir defaults to this folder).
Python 3 standard library only.
"""
import argparse
import json
import os
import random
import string
import sys

# The task the shipped files use; changing what ships is this one flag (or this one line).
DEFAULT_TASK = "upper"

TASKS = {
    "upper": lambda s: s.upper(),
    "reverse": lambda s: s[::-1],
    "sort": lambda s: "".join(sorted(s)),
    "copy": lambda s: s,
    "lower": lambda s: s,
}

# What the prompt shows of the random lowercase string; the identity unless listed.
PROMPT_FORM = {"lower": lambda s: s.upper()}


def random_string(rng, min_len, max_len):
    length = rng.randint(min_len, max_len)
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))


def conversation(task, s):
    return {"conversations": [
        {"from": "human", "value": f"{task}: {PROMPT_FORM.get(task, lambda x: x)(s)}"},
        {"from": "gpt", "value": TASKS[task](s)},
    ]}


def build(tasks, min_len, max_len, n_train, n_eval, seed):
    """Returns (train, eval) lists of conversations; eval strings are distinct and absent from train."""
    rng = random.Random(seed)
    distinct = sum(26 ** n for n in range(min_len, max_len + 1))
    # Rejection sampling below stays fast only while the held-out set leaves most strings free.
    if n_eval > distinct // 2:
        sys.exit(f"--eval {n_eval} is too many: only {distinct} distinct strings of length "
                 f"{min_len}..{max_len}, and at most half may be held out")

    held_out = []
    seen = set()
    while len(held_out) < n_eval:
        s = random_string(rng, min_len, max_len)
        if s not in seen:
            seen.add(s)
            held_out.append(s)

    train_strings = []
    while len(train_strings) < n_train:
        s = random_string(rng, min_len, max_len)
        if s not in seen:  # repeats within train are fine: they are draws from the same distribution
            train_strings.append(s)

    # Tasks take turns so every task is equally represented in both splits.
    train = [conversation(tasks[i % len(tasks)], s) for i, s in enumerate(train_strings)]
    evals = [conversation(tasks[i % len(tasks)], s) for i, s in enumerate(held_out)]
    return train, evals


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--task", choices=sorted(TASKS), default=DEFAULT_TASK,
                       help=f"the one task to generate (default: {DEFAULT_TASK})")
    which.add_argument("--mix", metavar="TASK,TASK,...",
                       help="comma-separated tasks to interleave instead of --task, e.g. upper,reverse")
    parser.add_argument("--min-len", type=int, default=3, help="shortest random string (default: 3)")
    parser.add_argument("--max-len", type=int, default=6, help="longest random string (default: 6)")
    parser.add_argument("--train", type=int, default=4000, help="training conversations (default: 4000)")
    parser.add_argument("--eval", type=int, default=200, help="held-out eval conversations (default: 200)")
    parser.add_argument("--seed", type=int, default=1234, help="random seed (default: 1234)")
    parser.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)),
                        help="where to write sft_train.jsonl and sft_eval.jsonl (default: this script's folder)")
    args = parser.parse_args()

    if args.mix is not None:
        tasks = [t.strip() for t in args.mix.split(",") if t.strip()]
        unknown = [t for t in tasks if t not in TASKS]
        if not tasks or unknown:
            parser.error(f"--mix: unknown or missing task(s) {unknown}; choose from {', '.join(sorted(TASKS))}")
    else:
        tasks = [args.task]
    if not 1 <= args.min_len <= args.max_len:
        parser.error("need 1 <= --min-len <= --max-len")
    if args.train < 1 or args.eval < 1:
        parser.error("--train and --eval must be positive")

    train, evals = build(tasks, args.min_len, args.max_len, args.train, args.eval, args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, records in (("sft_train.jsonl", train), ("sft_eval.jsonl", evals)):
        path = os.path.join(args.out_dir, name)
        write_jsonl(path, records)
        print(f"wrote {len(records)} conversations ({os.path.getsize(path)} bytes) to {path}")


if __name__ == "__main__":
    main()
