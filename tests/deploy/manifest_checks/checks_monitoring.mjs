// The invariant checks of monitoring: 10. prometheus.io annotations and PodMonitors scrape the
// pods' metrics ports; 13. every PrometheusRule equals deploy/prometheus/tandem-rules.yml
// (firstDifference() says where they differ).
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { isDeepStrictEqual } from "node:util";

import { containerPort, containersOf, refOf, selectedWorkloads, workloads } from "./objects.mjs";

// 10. Pods' prometheus.io/port annotation is their metrics containerPort (and prometheus.io/scrape
// comes with a port; prometheus.io/path is /metrics); every PodMonitor selects some workload's
// pods and its endpoints name a port every selected pod has.
export function checkMetricsScraping(objects) {
  const problems = [];
  for (const w of workloads(objects)) {
    const annotations = w.pod.metadata?.annotations ?? {};
    const metricsPorts = containersOf(w.pod).map((c) => containerPort(c, "metrics"))
      .filter((p) => p !== undefined);
    const port = annotations["prometheus.io/port"];
    if (annotations["prometheus.io/scrape"] === "true" && port === undefined) {
      problems.push(`${w.ref}: prometheus.io/scrape without prometheus.io/port`);
    }
    if (port !== undefined && !metricsPorts.includes(Number(port))) {
      problems.push(`${w.ref}: prometheus.io/port ${port}, but its metrics containerPort is ` +
                    `${metricsPorts.join(", ") || "not declared"}`);
    }
    const metricsPath = annotations["prometheus.io/path"];
    if (metricsPath !== undefined && metricsPath !== "/metrics") {
      problems.push(`${w.ref}: prometheus.io/path ${metricsPath}, tandem serves /metrics`);
    }
  }
  for (const pm of objects.filter((o) => o?.kind === "PodMonitor")) {
    const selected = selectedWorkloads(objects, pm.spec?.selector);
    if (selected.length === 0) problems.push(`${refOf(pm)}: selector matches no workload's pods`);
    const endpoints = pm.spec?.podMetricsEndpoints ?? [];
    if (endpoints.length === 0) problems.push(`${refOf(pm)}: no podMetricsEndpoints`);
    for (const ep of endpoints) {
      const target = ep.port ?? ep.portNumber ?? ep.targetPort;
      if (target === undefined) {
        problems.push(`${refOf(pm)}: an endpoint names no port`);
        continue;
      }
      if (ep.path !== undefined && ep.path !== "/metrics") {
        problems.push(`${refOf(pm)}: endpoint path ${ep.path}, tandem serves /metrics`);
      }
      for (const w of selected) {
        const ports = containersOf(w.pod).flatMap((c) => c.ports ?? []);
        const ok = typeof target === "string" ? ports.some((p) => p.name === target)
                                              : ports.some((p) => p.containerPort === target);
        if (!ok) {
          problems.push(`${refOf(pm)}: endpoint port ${JSON.stringify(target)} is not a port ` +
                        `of ${w.ref}'s containers`);
        }
      }
    }
  }
  return problems;
}

// 13. Every PrometheusRule's spec.groups equal ctx.prometheusRuleGroups (the `groups` of
// deploy/prometheus/tandem-rules.yml): the PrometheusRule is generated from that file.
export function checkPrometheusRuleGroups(objects, ctx) {
  const problems = [];
  for (const rule of objects.filter((o) => o?.kind === "PrometheusRule")) {
    const diff = firstDifference(rule.spec?.groups, ctx.prometheusRuleGroups, "spec.groups");
    if (diff) {
      problems.push(`${refOf(rule)}: differs from deploy/prometheus/tandem-rules.yml at ${diff} ` +
                    `(re-run deploy/prometheus/make-prometheusrule.sh)`);
    }
  }
  return problems;
}

// The first path where `a` and `b` differ ("spec.groups[1].rules[0].expr: 'x' vs 'y'"), or null.
export function firstDifference(a, b, at = "") {
  if (isDeepStrictEqual(a, b)) return null;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); ++i) {
      const d = firstDifference(a[i], b[i], `${at}[${i}]`);
      if (d) return d;
    }
  } else if (a && b && typeof a === "object" && typeof b === "object" &&
             !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], `${at}.${k}`);
      if (d) return d;
    }
  }
  const show = (v) => (v === undefined ? "(absent)" : JSON.stringify(v));
  return `${at}: ${show(a)} vs ${show(b)}`;
}
