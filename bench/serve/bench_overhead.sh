#!/usr/bin/env bash
# tandem-bench's own overhead on this machine: starts tandem-bench-echo-server (answers at once,
# no model) and runs tandem-bench against it at increasing request rates, each for about
# SECONDS_PER_RATE seconds of arrivals. A rate is sustained when the achieved request throughput
# is >= 95% of the offered rate and no request failed; the highest sustained rate is what
# tandem-bench can drive here (with the echo server sharing the machine). Arrivals are nearly
# periodic (--burstiness 100): with Poisson arrivals a few thousand requests' own spread (about
# 1/sqrt(N)) would decide the 95% test at low rates, not the bench. Prints a table and writes
# BUILD/bench/bench_overhead.json; "bench CPU" is tandem-bench's user+system time per request.
#
#   bench/serve/bench_overhead.sh
#
# BUILD (default build), RATES (default "100 200 500 1000 2000 4000 8000"), SECONDS_PER_RATE (5),
# INPUT_LEN (16), OUTPUT_LEN (16), BURSTINESS (100; 1 for Poisson), API (http) override the
# defaults.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD:-$root/build}"
bin="$build/bin"
for b in tandem-bench tandem-bench-echo-server; do
  [[ -x "$bin/$b" ]] || { echo "missing $bin/$b (ninja -C $build $b)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin/tandem-bench-echo-server" --listen 127.0.0.1:0 --ready-file "$work/echo.json" \
  >"$work/echo.log" 2>&1 &
for _ in $(seq 100); do [[ -f "$work/echo.json" ]] && break; sleep 0.05; done
[[ -f "$work/echo.json" ]] || { echo "the echo server did not start:" >&2; cat "$work/echo.log" >&2; exit 1; }
mkdir -p "$build/bench"
out="$build/bench/bench_overhead.json"
echo "tandem-bench against tandem-bench-echo-server, $(nproc) cores," \
  "${INPUT_LEN:-16} in / ${OUTPUT_LEN:-16} out tokens"
python3 - "$bin/tandem-bench" "$work" "$out" <<PY
import json, os, resource, subprocess, sys
bench, work, out = sys.argv[1:4]
address = json.load(open(os.path.join(work, "echo.json")))["http"]
rates = [float(r) for r in "${RATES:-100 200 500 1000 2000 4000 8000}".split()]
seconds, in_len, out_len = float("${SECONDS_PER_RATE:-5}"), "${INPUT_LEN:-16}", "${OUTPUT_LEN:-16}"
rows = []
print(f"{'offered':>8} {'requests':>8} {'achieved':>9} {'ratio':>6} {'failed':>6} "
      f"{'TTFT p50':>9} {'TTFT p99':>9} {'E2E p99':>8} {'bench CPU':>10}")
print(f"{'req/s':>8} {'':>8} {'req/s':>9} {'':>6} {'':>6} {'ms':>9} {'ms':>9} {'ms':>8} "
      f"{'us/req':>10}")
for rate in rates:
    n = max(int(rate * seconds), 50)
    result = os.path.join(work, f"rate_{rate:g}.json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([bench, "--api", "${API:-http}", "--address", address, "--model", "echo",
                           "--num-prompts", str(n), "--random-input-len", in_len,
                           "--random-output-len", out_len, "--request-rate", f"{rate:g}",
                           "--burstiness", "${BURSTINESS:-100}", "--warmup", "50", "--no-progress", "--no-requests-in-json",
                           "--out", result], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"tandem-bench failed at {rate:g} req/s:\n{proc.stderr}")
    s = json.load(open(result))["runs"][0]["summary"]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    row = {"offered_rate": rate, "requests": n, "achieved_rate": s["request_throughput"],
           "ratio": s["request_throughput"] / rate, "failed": s["failed"],
           "ttft_p50_ms": s["ttft_s"]["median"] * 1e3, "ttft_p99_ms": s["ttft_s"]["p99"] * 1e3,
           "e2e_p99_ms": s["e2e_s"]["p99"] * 1e3, "bench_cpu_us_per_request": cpu / n * 1e6}
    row["sustained"] = row["ratio"] >= 0.95 and row["failed"] == 0
    rows.append(row)
    print(f"{rate:8g} {n:8d} {row['achieved_rate']:9.1f} {row['ratio']:6.3f} {row['failed']:6d} "
          f"{row['ttft_p50_ms']:9.2f} {row['ttft_p99_ms']:9.2f} {row['e2e_p99_ms']:8.2f} "
          f"{row['bench_cpu_us_per_request']:10.1f}{'' if row['sustained'] else '  (not sustained)'}",
          flush=True)
best = max((r["offered_rate"] for r in rows if r["sustained"]), default=None)
print(f"highest sustained rate: {best:g} req/s" if best else "no rate sustained")
json.dump({"api": "${API:-http}", "burstiness": float("${BURSTINESS:-100}"), "cores": os.cpu_count(), "input_len": int(in_len),
           "output_len": int(out_len), "seconds_per_rate": seconds, "runs": rows,
           "highest_sustained_rate": best}, open(out, "w"), indent=2)
print(f"wrote {out}")
PY
