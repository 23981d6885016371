// Unit tests of manifest_checks.mjs's monitoring checks (10. metrics scraping, 13. PrometheusRule
// groups): each passes the correct fixture and fails, saying why, on a copy broken in one place.

import { describe, it } from "node:test";

import {
  checkMetricsScraping,
  checkPrometheusRuleGroups,
  requirePackages,
} from "./manifest_checks.mjs";
import { assertCatches, get } from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("10. metrics", () => {
  it("fails a prometheus.io/port that is not the metrics port", () => {
    assertCatches(checkMetricsScraping,
      (o) => {
        const template = get(o, "Deployment", "tandem-prefill").spec.template;
        template.metadata.annotations["prometheus.io/port"] = "9401";
      },
      /Deployment\/tandem-prefill: prometheus.io\/port 9401, but its metrics containerPort is 9402/);
  });
  it("fails a PodMonitor endpoint naming a port the pods lack", () => {
    assertCatches(checkMetricsScraping,
      (o) => { get(o, "PodMonitor", "tandem").spec.podMetricsEndpoints[0].port = "prometheus"; },
      /PodMonitor\/tandem: endpoint port "prometheus" is not a port of Deployment\/tandem-router/);
  });
  it("fails a PodMonitor that selects nothing", () => {
    assertCatches(checkMetricsScraping,
      (o) => { get(o, "PodMonitor", "tandem").spec.selector = { matchLabels: { app: "tandem" } }; },
      /PodMonitor\/tandem: selector matches no workload's pods/);
  });
});

describe("13. PrometheusRule", () => {
  it("fails groups that differ from tandem-rules.yml", () => {
    assertCatches(checkPrometheusRuleGroups,
      (o) => { get(o, "PrometheusRule", "tandem").spec.groups[1].rules[0].for = "5m"; },
      /PrometheusRule\/tandem: differs .* at spec.groups\[1\].rules\[0\].for: "5m" vs "10m"/);
  });
});
