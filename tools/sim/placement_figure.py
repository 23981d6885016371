#!/usr/bin/env python3
"""The placement study's figure: goodput per GPU relative to colocated, per workload. Reads one or
more placement_study.py JSON files and writes one self-contained SVG with a panel per file; each
workload is a group of three bars normalised to colocated = 1.0 (the better of its least_loaded and
round_robin; least_loaded alone in files from before round_robin was run): colocated, the best
fixed disaggregated policy (round_robin, least_loaded, prefix_aware) and the cost policy (the row's
"cost": the best of its colocated, disaggregated and auto cells, on its own shapes or the
baselines'). A value of 0 means no configuration met the SLO; "∞"
marks a policy that met it where colocated did not. Standard library only. Prints the path written.

  tools/sim/placement_figure.py --out docs/placement_study/goodput.svg \\
      bench/results/placement_study_8gpu.json bench/results/placement_study_64gpu.json \\
      bench/results/placement_study_64gpu_tp_search.json \\
      bench/results/placement_study_64gpu_long_prompt.json
"""
import argparse
import json
import math
import os
from xml.sax.saxutils import escape

WIDTH = 900
MARGIN_L, MARGIN_R = 78, 20
HEADER_H = 88           # figure title and legend
PANEL_H = 290           # one panel: title, plot, workload labels
PLOT_TOP, PLOT_H = 34, 200
BAR_W, BAR_GAP = 44, 6
# (label, colour) of the three bars, in order.
SERIES = [("colocated (best of least_loaded and round_robin)", "#9e9e9e"),
          ("disaggregated, best fixed policy (round_robin / least_loaded / prefix_aware)",
           "#4c78a8"),
          ("cost policy (best of colocated, disaggregated and auto)", "#f58518")]
DISAGG_FIXED = ("disaggregated/round_robin", "disaggregated/least_loaded",
                "disaggregated/prefix_aware")
COST = ("colocated/cost", "disaggregated/cost", "auto/cost")


def cell(row, name):
    return float(row.get("cells", {}).get(name, {}).get("goodput_per_gpu", 0.0))


def values(row):
    """(colocated, best fixed disaggregated, cost) goodput per GPU of one row."""
    col = row.get("colocated", cell(row, "colocated/least_loaded"))
    dis = row.get("disaggregated", max(cell(row, c) for c in DISAGG_FIXED))
    cost = row.get("cost", max(cell(row, c) for c in COST))
    return float(col), float(dis), float(cost)


def relative(vals):
    """Each value over colocated; None where colocated is 0 and the other is not (unbounded)."""
    col = vals[0]
    if col > 0:
        return [v / col for v in vals]
    return [0.0] + [0.0 if v == 0 else None for v in vals[1:]]


def panel_title(study):
    tp = study.get("tp")
    tp = f"TP {tp} per pool" if isinstance(tp, str) and "," in tp else f"TP {tp}"
    return f"{study.get('gpus')} × H100, {study.get('model')}, {tp}"


def text(x, y, s, **attrs):
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(str(s))}</text>'


def label(r):
    if r is None:
        return "∞"
    return "0" if r == 0 else f"{r:.2f}×"


def draw_panel(study, rows, top, ymax, out):
    out.append(text(MARGIN_L, top + 18, panel_title(study), font_size=15, font_weight="bold"))
    x0, y0 = MARGIN_L, top + PLOT_TOP + PLOT_H  # the plot's origin (bottom-left)
    plot_w = WIDTH - MARGIN_L - MARGIN_R

    def y(v):
        return y0 - PLOT_H * min(v, ymax) / ymax

    step = 0.5 if ymax <= 3 else 1.0
    t = 0.0
    while t <= ymax + 1e-9:
        out.append(f'<line x1="{x0}" y1="{y(t):.1f}" x2="{x0 + plot_w}" y2="{y(t):.1f}" '
                   f'stroke="#e6e6e6"/>')
        out.append(text(x0 - 6, y(t) + 4, f"{t:.1f}", text_anchor="end", font_size=12))
        t += step
    out.append(f'<line x1="{x0}" y1="{y0 - PLOT_H}" x2="{x0}" y2="{y0}" stroke="#333"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + plot_w}" y2="{y0}" stroke="#333"/>')
    cy = y0 - PLOT_H / 2
    out.append(f'<text font-size="13" text-anchor="middle" transform="rotate(-90 0 0)">'
               f'<tspan x="{-cy:.1f}" y="22">goodput per GPU,</tspan>'
               f'<tspan x="{-cy:.1f}" y="38">relative to colocated</tspan></text>')
    if not rows:
        out.append(text(x0 + plot_w / 2, cy, "no rows for these arrivals", font_size=13,
                        text_anchor="middle", fill="#777"))
        return
    group_w = plot_w / len(rows)
    bars_w = len(SERIES) * BAR_W + (len(SERIES) - 1) * BAR_GAP
    labels = []  # drawn last, over the dashed line, with a white halo
    for i, row in enumerate(rows):
        gx = x0 + group_w * i + (group_w - bars_w) / 2
        for j, r in enumerate(relative(values(row))):
            bx = gx + j * (BAR_W + BAR_GAP)
            v = ymax if r is None else r
            h = y0 - y(v)
            out.append(f'<rect x="{bx:.1f}" y="{y(v):.1f}" width="{BAR_W}" height="{h:.1f}" '
                       f'fill="{SERIES[j][1]}"/>')
            labels.append(text(bx + BAR_W / 2, y(v) - 4, label(r), font_size=12,
                               text_anchor="middle", stroke="#fff", stroke_width=3,
                               paint_order="stroke"))
        cx = x0 + group_w * (i + 0.5)
        out.append(text(cx, y0 + 20, row.get("workload", "?"), font_size=14,
                        text_anchor="middle"))
        slo = f"TTFT {row.get('slo_ttft_ms')} ms, TPOT {row.get('slo_tpot_ms')} ms"
        out.append(text(cx, y0 + 37, slo, font_size=11, text_anchor="middle", fill="#555"))
    out.append(f'<line x1="{x0}" y1="{y(1.0):.1f}" x2="{x0 + plot_w}" y2="{y(1.0):.1f}" '
               f'stroke="#333" stroke-width="1.2" stroke-dasharray="6 4"/>')
    out.extend(labels)


def figure(studies, arrivals):
    panels = [(s, [r for r in s.get("rows", []) if r.get("arrivals") == arrivals])
              for s in studies]
    top_rel = [r for _, rows in panels for row in rows for r in relative(values(row))
               if r is not None]
    # Room above the tallest bar for its label; ticks every 0.5.
    ymax = max(1.5, math.ceil((max(top_rel, default=1.0) * 1.12) * 2) / 2)
    height = HEADER_H + PANEL_H * len(panels) + 10
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" '
           f'fill="#222">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fff"/>',
           text(MARGIN_L, 24, f"Goodput per GPU by placement policy, relative to colocated "
                f"(tandem-sim, {arrivals.capitalize()} arrivals)", font_size=15,
                font_weight="bold")]
    lx, ly = MARGIN_L, 46
    for (name, colour), (dx, dy) in zip(SERIES, [(0, 0), (0, 18), (200, 0)]):
        out.append(f'<rect x="{lx + dx}" y="{ly + dy - 10}" width="12" height="12" '
                   f'fill="{colour}"/>')
        out.append(text(lx + dx + 17, ly + dy, name, font_size=12))
    out.append(f'<line x1="{lx + 560}" y1="{ly - 4}" x2="{lx + 590}" y2="{ly - 4}" '
               f'stroke="#333" stroke-dasharray="6 4"/>')
    out.append(text(lx + 596, ly, "colocated = 1.0", font_size=12))
    out.append(text(lx + 560, ly + 18, "SLO at p90, per workload below", font_size=12))
    out.append(text(lx + 560, ly + 36, "\"0\": no configuration met the SLO", font_size=12))
    for k, (study, rows) in enumerate(panels):
        draw_panel(study, rows, HEADER_H + PANEL_H * k, ymax, out)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE", help="placement_study.py JSON")
    ap.add_argument("--arrivals", default="poisson", choices=["poisson", "bursty"])
    ap.add_argument("--out", default="docs/placement_study/goodput.svg")
    args = ap.parse_args()
    studies = []
    for path in args.files:
        with open(path) as f:
            studies.append(json.load(f))
    svg = figure(studies, args.arrivals)
    if os.path.dirname(args.out):
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(svg)
    print(args.out)


if __name__ == "__main__":
    main()
