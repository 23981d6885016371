"""The comparison tools/sim/validate.py reports and tools/sim/resim.py repeats: relative errors,
goodput of a sweep, and the Markdown tables of tools/sim/README.md ("Validation against the real
cluster")."""

import os
import platform
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOODPUT_THRESHOLD = 0.9  # goodput: the highest rate with at least this share within the SLO
METRICS = [("ttft_p50", "ttft_s", "median"), ("ttft_p90", "ttft_s", "p90"),
           ("tpot_p50", "tpot_s", "median"), ("tpot_p90", "tpot_s", "p90")]


def rel(sim, real):
    if real is None or sim is None or real == 0:
        return None
    return (sim - real) / real


def goodput(points):
    """DistServe's goodput of a sweep: the highest rate with attainment >= the threshold."""
    ok = [rate for rate, attainment in points if attainment >= GOODPUT_THRESHOLD]
    return max(ok) if ok else None


def fmt_err(e):
    return "n/a" if e is None else f"{e * 100:+.1f}%"


def table(rows):
    lines = ["| workload | setup | rate | n | TTFT p50 real / sim ms (err) | TTFT p90 | TPOT p50 "
             "| TPOT p90 | TTFT p90 sim range | SLO met real / sim | good req/s err |",
             "|" + "---|" * 11]
    for r in rows:
        cells = [r["workload"], r["setup"], f"{r['rate']:g}", str(r["requests"])]
        for k, _, _ in METRICS:
            cells.append(f"{r['real'][k] * 1e3:.1f} / {r['sim'][k] * 1e3:.1f} "
                         f"({fmt_err(r['error'][k])})")
        lo, hi = r["sim_range"]["ttft_p90"]
        cells.append(f"{lo * 1e3:.1f}–{hi * 1e3:.1f}")
        cells.append(f"{r['real']['slo_attainment'] * 100:.0f}% / "
                     f"{r['sim']['slo_attainment'] * 100:.0f}%")
        cells.append(fmt_err(r["error"]["good_request_rate"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goodput_table(sweeps):
    lines = ["| workload | setup | SLO TTFT, TPOT | rates | goodput real | goodput sim |",
             "|---|---|---|---|---|---|"]
    for s in sweeps:
        g = lambda v: "none" if v is None else f"{v:g} req/s"
        lines.append(f"| {s['workload']} | {s['setup']} | {s['slo']['ttft_ms']} ms, "
                     f"{s['slo']['tpot_ms']} ms | {', '.join(f'{x:g}' for x in s['rates'])} | "
                     f"{g(s['real'])} | {g(s['sim'])} |")
    return "\n".join(lines)


def scale_table(checks, scale):
    lines = [f"| workload | setup | rate | metric | real at X = {scale:g} | real at 2X | change | "
             f"error at 2X |", "|---|---|---|---|---|---|---|---|"]
    for c in checks:
        for k, _, _ in METRICS:
            a, b = c["real_x"][k], c["real_2x"][k]
            lines.append(f"| {c['workload']} | {c['setup']} | {c['rate']:g} | {k} | "
                         f"{a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {fmt_err(rel(b, a))} | "
                         f"{fmt_err(c['error_2x'][k])} |")
    return "\n".join(lines)


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine():
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            if m:
                cpu = m.group(1).strip()
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} vCPUs"
