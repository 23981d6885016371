#!/usr/bin/env python3
"""Writes a small byte-level BPE tokenizer cut from a real one (plain python3, no packages).

The reference models of the transformers comparison (make_reference_models.sh) must be small, and a
model's embedding and LM head scale with its vocabulary: with the Llama-3 tokenizer's 128,256
tokens they alone would be 64 MiB per model at hidden 256 in bf16. tandem-make-model takes the
vocabulary from the tokenizer, so this cuts one down instead:

  * model.vocab keeps the tokens with id < --text-tokens (ids unchanged). In Llama-3's tokenizer
    ids 0-255 are the 256 single bytes, so every text still encodes (checked);
  * model.merges keeps the merges whose two parts and result are all kept, in their order;
  * the special tokens named by tokenizer_config.json's bos_token and eos_token (and --keep-special
    ones) move to ids --text-tokens, --text-tokens + 1, ...; the others are dropped;
  * tokenizer_config.json keeps bos/eos, its added_tokens_decoder is renumbered, and its
    chat_template is dropped (it names special tokens that are gone).

Usage: small_tokenizer.py --src DIR --out DIR [--text-tokens N] [--keep-special TOKEN ...]
(DIR holds tokenizer.json and tokenizer_config.json.)
"""

import argparse
import json
import os
import sys


def _bytes_to_unicode():
    """GPT-2's byte-level alphabet: the 256 characters that stand for the 256 bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def _merge_parts(merge):
    if isinstance(merge, str):
        parts = merge.split(" ")
    else:
        parts = list(merge)
    if len(parts) != 2:
        raise ValueError(f"merge {merge!r} is not two tokens")
    return parts


def cut_tokenizer(tokenizer, config, text_tokens, keep_special=()):
    """Returns (tokenizer, config) cut to `text_tokens` ordinary tokens plus the kept specials."""
    model = tokenizer.get("model", {})
    if model.get("type") != "BPE":
        raise ValueError(f"only BPE tokenizers can be cut, not {model.get('type')!r}")
    vocab = {tok: i for tok, i in model["vocab"].items() if i < text_tokens}
    if len(vocab) != text_tokens:
        raise ValueError(f"ids 0..{text_tokens - 1} are not all ordinary tokens")
    missing = [c for c in _bytes_to_unicode() if c not in vocab]
    if missing:
        raise ValueError(f"{len(missing)} single bytes would have no token (e.g. {missing[0]!r})")
    merges = []
    for merge in model["merges"]:
        a, b = _merge_parts(merge)
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(merge)

    def special_name(value):
        return value.get("content") if isinstance(value, dict) else value

    wanted = [special_name(config.get("bos_token")), special_name(config.get("eos_token"))]
    wanted += list(keep_special)
    names = []
    for name in wanted:
        if name and name not in names:
            names.append(name)
    by_content = {t["content"]: t for t in tokenizer.get("added_tokens", [])}
    added, new_ids = [], {}
    for name in names:
        if name not in by_content:
            raise ValueError(f"special token {name!r} is not in tokenizer.json's added_tokens")
        new_ids[name] = text_tokens + len(added)
        added.append(dict(by_content[name], id=new_ids[name]))

    out = dict(tokenizer)
    out["model"] = dict(model, vocab=vocab, merges=merges)
    out["added_tokens"] = added
    post = tokenizer.get("post_processor")
    if isinstance(post, dict) and post.get("type") == "TemplateProcessing":
        post = json.loads(json.dumps(post))
        for name, entry in post.get("special_tokens", {}).items():
            if name not in new_ids:
                raise ValueError(f"the post-processor adds {name!r}, which is not kept")
            entry["ids"] = [new_ids[name]]
        out["post_processor"] = post
    elif isinstance(post, dict) and post.get("type") not in (None, "ByteLevel"):
        raise ValueError(f"post-processor {post.get('type')!r} is not handled")

    cfg = {k: v for k, v in config.items() if k != "chat_template"}
    if "added_tokens_decoder" in config:
        cfg["added_tokens_decoder"] = {
            str(new_ids[v["content"]]): v
            for v in config["added_tokens_decoder"].values()
            if v.get("content") in new_ids
        }
    return out, cfg


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", required=True, help="folder with tokenizer.json and "
                        "tokenizer_config.json")
    parser.add_argument("--out", required=True, help="folder to write them to")
    parser.add_argument("--text-tokens", type=int, default=4094)
    parser.add_argument("--keep-special", action="append", default=[])
    args = parser.parse_args(argv)
    with open(os.path.join(args.src, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    with open(os.path.join(args.src, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    try:
        tok, cfg = cut_tokenizer(tokenizer, config, args.text_tokens, args.keep_special)
    except ValueError as e:
        print(f"small_tokenizer.py: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
    print(f"small_tokenizer.py: {args.out}: {args.text_tokens} tokens, "
          f"{len(tok['model']['merges'])} merges, specials "
          f"{[(t['content'], t['id']) for t in tok['added_tokens']]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
