// Unit tests of manifest_checks.mjs's schema validation (kubernetes-models): apiVersion + kind
// map to model classes, and validateSchemas() reports wrongly typed, missing and unknown fields of
// Kubernetes and Prometheus Operator objects, and kinds it has no schema for.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { modelClass, requirePackages, validateSchemas } from "./manifest_checks.mjs";
import { container, get, good } from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("schema validation (kubernetes-models)", () => {
  it("maps apiVersion + kind to the model class, and nothing else", async () => {
    assert.equal((await modelClass("apps/v1", "Deployment")).kind, "Deployment");
    assert.equal((await modelClass("v1", "Service")).apiVersion, "v1");
    assert.equal((await modelClass("monitoring.coreos.com/v1", "PrometheusRule")).kind,
                 "PrometheusRule");
    assert.equal(await modelClass("apps/v1", "PodSpec"), null, "a type that is not a kind");
    assert.equal(await modelClass("apps/v9", "Deployment"), null);
    assert.equal(await modelClass("../../x", "Deployment"), null);
  });

  it("the model's validate() throws on an invalid object (how the package works)", async () => {
    const { Deployment } = await import("kubernetes-models/apps/v1");
    const d = good().find((o) => o.kind === "Deployment");
    new Deployment(d).validate();
    d.spec.replicas = "two";
    assert.throws(() => new Deployment(d).validate(), /replicas must be integer/);
  });

  it("reports a wrongly typed field", async () => {
    const objects = good();
    get(objects, "Deployment", "tandem-router").spec.replicas = "two";
    const problems = await validateSchemas(objects);
    assert.equal(problems.length, 1);
    assert.match(problems[0], /Deployment\/tandem-router: .*spec\/replicas must be integer/);
  });

  it("reports a missing required field", async () => {
    const objects = good();
    delete container(objects, "decode").name;
    assert.match((await validateSchemas(objects)).join("\n"),
                 /containers\/0 must have required property name/);
  });

  it("reports a field the schema does not have (a typo)", async () => {
    const objects = good();
    const c = container(objects, "prefill");
    c.readinesProbe = c.readinessProbe;
    get(objects, "Service", "tandem-router").spec.ports[0].targetport = "http";
    const problems = await validateSchemas(objects);
    assert.equal(problems.length, 2, problems.join("\n"));
    assert.match(problems[0],
                 /Deployment\/tandem-prefill: unknown field \/spec\/template\/spec\/containers\/0\/readinesProbe/);
    assert.match(problems[1], /Service\/tandem-router: unknown field \/spec\/ports\/0\/targetport/);
  });

  it("validates Prometheus Operator objects", async () => {
    const objects = good();
    get(objects, "PodMonitor", "tandem").spec.podMetricsEndpoints = "metrics";
    get(objects, "PrometheusRule", "tandem").spec.groups[0].rules[0].recrd = "x";
    const problems = await validateSchemas(objects);
    assert.match(problems.join("\n"), /PodMonitor\/tandem: .*podMetricsEndpoints must be array/);
    assert.match(problems.join("\n"), /PrometheusRule\/tandem: unknown field .*rules\/0\/recrd/);
  });

  it("fails an apiVersion/kind it has no model for", async () => {
    const objects = [{ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w" } },
                     { apiVersion: "apps/v1", kind: "Deploymnet", metadata: { name: "d" } }];
    const problems = await validateSchemas(objects);
    assert.equal(problems.length, 2);
    assert.match(problems[0], /no schema for apiVersion example.com\/v1 kind Widget/);
    assert.match(problems[1], /no schema for apiVersion apps\/v1 kind Deploymnet/);
  });
});
