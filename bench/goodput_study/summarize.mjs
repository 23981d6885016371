// Summarizes a goodput study directory (goodput_study.sh's OUT_DIR): reads every
// <workload>-<config>.json that tandem-bench wrote, prints a markdown table of goodput per
// configuration, and writes summary.md, summary.json and goodput.svg (SLO attainment against the
// request rate, one panel per workload, one line per configuration). Extra directories (e.g. a
// second run of goodput_study.sh at rates between the first one's) add their runs to the same
// (workload, configuration); a rate measured twice keeps the later directory's run. The goodput
// is then recomputed over all rates: the highest rate with attainment >= the threshold.
// `--extra-slo WORKLOAD:TTFT_MS:TPOT_MS` (repeatable) adds a study of the same runs judged at
// other limits, from the per-request records in the JSON.
//   node bench/goodput_study/summarize.mjs [--extra-slo W:T:P]... OUT_DIR [MORE_DIRS...]
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const extraSlos = [];
for (let i = args.indexOf('--extra-slo'); i >= 0; i = args.indexOf('--extra-slo')) {
  const [workload, ttft, tpot] = (args[i + 1] ?? '').split(':');
  if (!workload || !(Number(ttft) > 0) || !(Number(tpot) > 0)) {
    console.error(`--extra-slo wants WORKLOAD:TTFT_MS:TPOT_MS, got '${args[i + 1]}'`);
    process.exit(2);
  }
  extraSlos.push({workload, ttft_s: Number(ttft) / 1000, tpot_s: Number(tpot) / 1000});
  args.splice(i, 2);
}
const [dir, ...moreDirs] = args;
if (!dir) {
  console.error('usage: node summarize.mjs OUT_DIR [MORE_DIRS...]');
  process.exit(2);
}
const configs = ['colocated-4', '1p3d', '2p2d'];
const byKey = new Map();
for (const d of [dir, ...moreDirs]) {
  for (const file of fs.readdirSync(d).sort()) {
    const m = file.match(/^(.+)-(colocated-4|1p3d|2p2d)\.json$/);
    if (!m) continue;
    const report = JSON.parse(fs.readFileSync(path.join(d, file), 'utf8'));
    const key = `${m[1]}/${m[2]}`;
    if (!byKey.has(key)) {
      byKey.set(key, {workload: m[1], config: m[2], slo: report.slo,
        threshold: report.goodput.threshold, points: new Map()});
    }
    const s = byKey.get(key);
    for (const r of report.runs) {
      for (const extra of extraSlos.filter((e) => e.workload === m[1])) {
        if (!Array.isArray(r.requests)) {
          console.error(`${file}: no per-request records for --extra-slo`);
          process.exit(1);
        }
        const name = `${m[1]} (TPOT ≤ ${Math.round(extra.tpot_s * 1000)} ms)`;
        const k = `${name}/${m[2]}`;
        if (!byKey.has(k)) {
          byKey.set(k, {workload: name, config: m[2], slo: {ttft_s: extra.ttft_s,
            tpot_s: extra.tpot_s}, threshold: report.goodput.threshold, points: new Map()});
        }
        const met = r.requests.filter((q) => q.success && q.ttft_s <= extra.ttft_s &&
          (q.tpot_s === null || q.tpot_s === undefined || q.tpot_s <= extra.tpot_s)).length;
        byKey.get(k).points.set(Number(r.rate), {
          rate: Number(r.rate), time_scale: report.config.time_scale,
          attainment: r.requests.length ? met / r.requests.length : 1,
          failed: r.summary.failed,
        });
      }
      s.points.set(Number(r.rate), {
        rate: Number(r.rate),
        time_scale: report.config.time_scale,
        attainment: r.summary.slo_attainment,
        ttft_p50: r.summary.ttft_s.median,
        ttft_p99: r.summary.ttft_s.p99,
        tpot_p50: r.summary.tpot_s.median,
        tpot_p99: r.summary.tpot_s.p99,
        failed: r.summary.failed,
      });
    }
  }
}
const studies = [...byKey.values()].map((s) => {
  const points = [...s.points.values()].sort((a, b) => a.rate - b.rate);
  let rate = null, monotonic = true;
  for (const p of points) {
    if (p.attainment >= s.threshold) {
      if (rate !== null && points.some((q) => q.rate < p.rate && q.attainment < s.threshold)) {
        monotonic = false;
      }
      rate = p.rate;
    }
  }
  return {...s, points, goodput: {rate, monotonic, threshold: s.threshold}};
});
if (studies.length === 0) {
  console.error(`no <workload>-<config>.json files in ${dir}`);
  process.exit(1);
}
const workloads = [...new Set(studies.map((s) => s.workload))];

const fmt = (v, d = 1) => (v === null || v === undefined ? '—' : Number(v).toFixed(d));
let md = '| workload | SLO (TTFT / TPOT) | configuration | goodput (req/s) | vs colocated |\n';
md += '|---|---|---|---|---|\n';
for (const w of workloads) {
  const rows = studies.filter((s) => s.workload === w)
    .sort((a, b) => configs.indexOf(a.config) - configs.indexOf(b.config));
  const colo = rows.find((s) => s.config === 'colocated-4')?.goodput.rate ?? null;
  for (const s of rows) {
    const g = s.goodput.rate;
    const ratio = colo && g !== null ? `${(g / colo).toFixed(2)}×` : '—';
    const note = s.goodput.monotonic ? '' : ' (not monotonic)';
    md += `| ${w} | ${fmt(s.slo.ttft_s * 1000, 0)} ms / ${fmt(s.slo.tpot_s * 1000, 0)} ms | ` +
      `${s.config} | ${g === null ? 'none' : fmt(g, 0)}${note} | ${ratio} |\n`;
  }
}
md += '\nSLO attainment per swept rate:\n\n';
for (const s of studies) {
  md += `- ${s.workload} / ${s.config}: ` +
    s.points.map((p) => `${fmt(p.rate, 0)}→${fmt(p.attainment * 100, 0)}%` +
      (p.failed ? ` (${p.failed} failed)` : '')).join(', ') + '\n';
}
fs.writeFileSync(path.join(dir, 'summary.md'), md);
fs.writeFileSync(path.join(dir, 'summary.json'), JSON.stringify(studies, null, 2));

// goodput.svg: one panel per workload.
const W = 460, H = 300, M = { l: 56, r: 16, t: 40, b: 46 };
const colors = { 'colocated-4': '#d62728', '1p3d': '#1f77b4', '2p2d': '#2ca02c' };
const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
let svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W * workloads.length}" height="${H}" ` +
  `font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n`;
workloads.forEach((w, i) => {
  const x0 = i * W, rows = studies.filter((s) => s.workload === w);
  const maxRate = Math.max(...rows.flatMap((s) => s.points.map((p) => p.rate)));
  const px = (r) => x0 + M.l + (r / maxRate) * (W - M.l - M.r);
  const py = (a) => M.t + (1 - a) * (H - M.t - M.b);
  const slo = rows[0].slo;
  svg += `<text x="${x0 + W / 2}" y="18" text-anchor="middle" font-size="13">${esc(w)}: ` +
    `TTFT ≤ ${fmt(slo.ttft_s * 1000, 0)} ms, TPOT ≤ ${fmt(slo.tpot_s * 1000, 0)} ms</text>\n`;
  svg += `<line x1="${px(0)}" y1="${py(0)}" x2="${px(maxRate)}" y2="${py(0)}" stroke="black"/>\n`;
  svg += `<line x1="${px(0)}" y1="${py(0)}" x2="${px(0)}" y2="${py(1)}" stroke="black"/>\n`;
  for (let k = 0; k <= 5; ++k) {
    const a = k / 5, r = (maxRate * k) / 5;
    svg += `<text x="${px(0) - 6}" y="${py(a) + 4}" text-anchor="end">${k * 20}%</text>\n`;
    svg += `<text x="${px(r)}" y="${py(0) + 16}" text-anchor="middle">${fmt(r, 0)}</text>\n`;
  }
  svg += `<text x="${x0 + W / 2}" y="${H - 8}" text-anchor="middle">request rate (req/s)</text>\n`;
  svg += `<line x1="${px(0)}" y1="${py(0.9)}" x2="${px(maxRate)}" y2="${py(0.9)}" ` +
    `stroke="gray" stroke-dasharray="4,3"/>\n`;
  rows.forEach((s, j) => {
    const pts = s.points.map((p) => `${px(p.rate).toFixed(1)},${py(p.attainment).toFixed(1)}`);
    svg += `<polyline fill="none" stroke="${colors[s.config]}" stroke-width="2" ` +
      `points="${pts.join(' ')}"/>\n`;
    for (const p of s.points) {
      svg += `<circle cx="${px(p.rate).toFixed(1)}" cy="${py(p.attainment).toFixed(1)}" r="2.5" ` +
        `fill="${colors[s.config]}"/>\n`;
    }
    const g = s.goodput.rate;
    svg += `<text x="${px(0) + 8}" y="${py(0) - 10 - 14 * j}" fill="${colors[s.config]}">` +
      `${esc(s.config)}: goodput ${g === null ? 'none' : fmt(g, 0) + ' req/s'}</text>\n`;
  });
});
svg += '</svg>\n';
fs.writeFileSync(path.join(dir, 'goodput.svg'), svg);
console.log(md);
