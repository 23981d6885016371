// Unit tests of manifest_checks.mjs's checks of probes and graceful shutdown (1. probes, 2. grace
// period): each passes the correct fixture and fails, saying why, on a copy broken in one place.

import { describe, it } from "node:test";

import { checkGracePeriod, checkProbes, requirePackages } from "./manifest_checks.mjs";
import { assertCatches, container, podSpec } from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("1. probes", () => {
  it("fails a missing probe", () => {
    assertCatches(checkProbes,
      (o) => delete container(o, "decode").startupProbe,
      /container decode: no startupProbe/);
  });
  it("fails a probe on the wrong port", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "prefill").livenessProbe.grpc.port = 9402; },
      /livenessProbe checks port 9402, but the container's grpc port is 50071/);
  });
  it("fails a probe that is not the gRPC health check", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "router").readinessProbe = { httpGet: { path: "/ready", port: "http" } }; },
      /readinessProbe uses httpGet, not the gRPC health check/);
  });
  it("fails a container without a grpc port", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "router").ports[1].name = "rpc"; },
      /container router: no container port named grpc/);
  });
});

describe("2. grace period", () => {
  it("fails a grace period shorter than preStop + --drain-timeout-ms", () => {
    assertCatches(checkGracePeriod,
      (o) => { podSpec(o, "router").terminationGracePeriodSeconds = 120; },
      /terminationGracePeriodSeconds 120 must exceed .*10 s.*120000 \(args\) = 130 s/);
    assertCatches(checkGracePeriod,
      (o) => { podSpec(o, "router").terminationGracePeriodSeconds = 130; },
      /terminationGracePeriodSeconds 130 must exceed/);  // no margin at all: still too short
  });
  it("uses the binary's default drain timeout when the args set none", () => {
    assertCatches(checkGracePeriod,
      (o) => { podSpec(o, "decode").terminationGracePeriodSeconds = 40; },
      /terminationGracePeriodSeconds 40 .* 30000 \(default\)/);
  });
  it("uses Kubernetes' default grace period (30 s) when unset", () => {
    assertCatches(checkGracePeriod,
      (o) => { delete podSpec(o, "decode").terminationGracePeriodSeconds; },
      /terminationGracePeriodSeconds 30 must exceed/);
  });
  it("fails a preStop hook it cannot time", () => {
    assertCatches(checkGracePeriod,
      (o) => { container(o, "prefill").lifecycle.preStop = { httpGet: { path: "/x", port: 80 } }; },
      /cannot tell how long its preStop hook takes/);
  });
});
