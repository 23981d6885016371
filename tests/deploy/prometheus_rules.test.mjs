// deploy/prometheus: promtool accepts the rule file, its unit tests pass (each alert fires on the
// series that should fire it and stays quiet otherwise), every alert has a summary and a runbook
// that points at a section of deploy/README.md that exists, and the Grafana dashboard is
// well-formed (unique ids, panels inside the 24-column grid, every target on the datasource
// variable).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { readRuleFile } from "./prometheus_queries.mjs";

const source = process.env.TANDEM_SOURCE_DIR ?? path.resolve(import.meta.dirname, "../..");
const promDir = path.join(source, "deploy/prometheus");
const promtool = "/usr/bin/promtool";

function run(args) {
  assert.ok(fs.existsSync(promtool), "promtool is missing: run scripts/install-deps.sh (Debian package `prometheus`)");
  const r = spawnSync(promtool, args, { cwd: promDir, encoding: "utf8" });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

test("promtool check rules", () => {
  const r = run(["check", "rules", "tandem-rules.yml"]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /SUCCESS: \d+ rules found/);
});

test("promtool test rules: every alert fires when it should", () => {
  const r = run(["test", "rules", "tandem-rules.test.yml"]);
  assert.equal(r.code, 0, r.out);
  const tested = new Set([...fs.readFileSync(path.join(promDir, "tandem-rules.test.yml"), "utf8")
    .matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
  const { alerts } = readRuleFile(path.join(promDir, "tandem-rules.yml"));
  assert.deepEqual(alerts.map((a) => a.alert).filter((a) => !tested.has(a)), [], "alerts without a unit test");
});

test("every alert has a severity, a summary and a runbook section in deploy/README.md", () => {
  const readme = fs.readFileSync(path.join(source, "deploy/README.md"), "utf8");
  const anchors = new Set([...readme.matchAll(/^#+ (.+)$/gm)]
    .map((m) => m[1].trim().toLowerCase().replace(/[^\w\- ]/g, "").replace(/ /g, "-")));
  const { alerts } = readRuleFile(path.join(promDir, "tandem-rules.yml"));
  for (const a of alerts) {
    assert.ok(["warning", "critical"].includes(a.labels?.severity), `${a.alert}: severity`);
    assert.ok(a.annotations?.summary, `${a.alert}: summary`);
    const m = /^deploy\/README\.md#([\w-]+): \S/.exec(a.annotations?.runbook ?? "");
    assert.ok(m, `${a.alert}: runbook must read "deploy/README.md#anchor: what to do"`);
    assert.ok(anchors.has(m[1]), `${a.alert}: deploy/README.md has no section #${m[1]}`);
  }
});

test("the Grafana dashboard is well-formed", () => {
  const d = JSON.parse(fs.readFileSync(path.join(source, "deploy/grafana/tandem-dashboard.json"), "utf8"));
  assert.equal(d.uid, "tandem-overview");
  const ids = new Set();
  let targets = 0;
  for (const p of d.panels) {
    assert.ok(!ids.has(p.id), `duplicate panel id ${p.id}`);
    ids.add(p.id);
    assert.ok(p.gridPos.x >= 0 && p.gridPos.x + p.gridPos.w <= 24, `${p.title}: outside the grid`);
    if (p.type === "row") continue;
    assert.ok(p.title && p.description, `panel ${p.id}: title and description`);
    assert.equal(p.datasource.uid, "${datasource}", p.title);
    assert.ok(p.targets.length > 0, `${p.title}: no queries`);
    for (const t of p.targets) {
      assert.ok(t.expr && t.refId, p.title);
      assert.match(t.expr, /pool=~"\$pool"/, `${p.title}: query ignores the pool variable: ${t.expr}`);
      ++targets;
    }
  }
  assert.ok(targets >= 30);
  // The panels the deployment issue asks for, by title.
  for (const title of ["Request rate by status", "Time to first token", "Inter-token latency",
    "End-to-end request latency", "Tokens/s in and out", "Queue depth per stage",
    "KV blocks used per decode node", "KV transfer GB/s", "KV transfer time",
    "Prefix cache hit rate", "Placement decisions by reason"]) {
    assert.ok(d.panels.some((p) => p.title === title), `no panel "${title}"`);
  }
});
