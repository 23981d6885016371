#!/usr/bin/env python3
"""Writes a Mooncake-format JSON-lines trace (bench/serve/datasets.h, --dataset trace) shaped like
the trace released with the Mooncake paper (arXiv 2407.00079: one hour, 23,608 requests, mean
input 7,590 tokens, mean output 182), at any rate and length: Poisson arrivals, lognormal input
and output lengths with those means, and prompts that share leading 512-token blocks (hash_ids)
with earlier ones: a request continues one of `--prefixes` shared contexts (chosen by a Zipf law,
as documents and system prompts are) for a share of its blocks drawn uniformly from [0, 0.8), the
rest its own. The numbers are the generator's, not measured from the real trace; say so where the
trace is used.

  tools/sim/make_trace.py --rate 6.6 --duration-s 3600 --out /tmp/mooncake-like.jsonl
"""
import argparse
import bisect
import json
import math
import random
import sys


def lognormal(rng, mean, sigma):
    # Median chosen so the mean is `mean`.
    return rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, required=True, help="requests per second")
    p.add_argument("--duration-s", type=float, required=True)
    p.add_argument("--input-mean", type=float, default=7590)
    p.add_argument("--output-mean", type=float, default=182)
    p.add_argument("--input-sigma", type=float, default=0.9)
    p.add_argument("--output-sigma", type=float, default=0.8)
    p.add_argument("--input-max", type=int, default=120000)
    p.add_argument("--output-max", type=int, default=2048)
    p.add_argument("--prefixes", type=int, default=2000, help="shared contexts")
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.rate <= 0 or a.duration_s <= 0:
        sys.exit("make_trace.py: --rate and --duration-s must be > 0")
    rng = random.Random(a.seed)
    weights = [1.0 / (k + 1) ** a.zipf for k in range(a.prefixes)]
    cumulative = []
    total = 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    next_id = a.prefixes * 1000  # ids below are the shared contexts' blocks
    t = 0.0
    n = 0
    with open(a.out, "w") as out:
        while True:
            t += rng.expovariate(a.rate)
            if t >= a.duration_s:
                break
            inp = max(16, min(a.input_max, int(lognormal(rng, a.input_mean, a.input_sigma))))
            outp = max(1, min(a.output_max, int(lognormal(rng, a.output_mean, a.output_sigma))))
            blocks = (inp + 511) // 512
            ctx = bisect.bisect_left(cumulative, rng.random() * total)
            shared = min(blocks, int(blocks * rng.uniform(0, 0.8)))
            ids = [ctx * 1000 + k for k in range(min(shared, 1000))]
            while len(ids) < blocks:
                ids.append(next_id)
                next_id += 1
            out.write(json.dumps({"timestamp": int(t * 1000), "input_length": inp,
                                  "output_length": outp, "hash_ids": ids}) + "\n")
            n += 1
    print(f"make_trace.py: {n} requests over {a.duration_s:.0f} s -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
