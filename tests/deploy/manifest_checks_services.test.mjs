// Unit tests of manifest_checks.mjs's checks of Services, the router's DNS discovery, PDBs and
// HPAs (7, 8, 9, 9b): each passes the correct fixture and fails, saying why, on a copy broken in
// one place.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  checkDisruptionAndScaling,
  checkHpaTargetsOmitReplicas,
  checkRouterDiscovery,
  checkServices,
  requirePackages,
} from "./manifest_checks.mjs";
import {
  CTX,
  assertCatches,
  container,
  get,
  good,
  replaceArg,
} from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("7. Services", () => {
  const svc = (o, role) => get(o, "Service", `tandem-${role}`).spec;
  it("fails a named targetPort no container declares", () => {
    assertCatches(checkServices,
      (o) => { svc(o, "router").ports[0].targetPort = "web"; },
      /Service\/tandem-router: port http targets "web", which no container of Deployment\/tandem-router/);
  });
  it("fails a numeric targetPort no container declares", () => {
    assertCatches(checkServices,
      (o) => { svc(o, "decode").ports[1].targetPort = 9400; },
      /port metrics targets 9400/);
  });
  it("fails a selector that matches no pods", () => {
    assertCatches(checkServices,
      (o) => { svc(o, "prefill").selector["app.kubernetes.io/component"] = "prefil"; },
      /Service\/tandem-prefill: selector .* matches no workload's pods/);
  });
  it("fails a prefill or decode Service that is not headless", () => {
    assertCatches(checkServices,
      (o) => { delete svc(o, "decode").clusterIP; },
      /Service\/tandem-decode: selects tandem-decode pods, so it must be headless/);
  });
});

describe("8. router discovery", () => {
  it("fails a --decode-dns naming a Service that is not in the render", () => {
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--decode-dns", "--decode-dns=decode:50061"),
      /--decode-dns names Service decode, which is not in the render/);
  });
  it("fails a --prefill-dns port that is not the prefill pods' grpc port", () => {
    const wrongPort = (o) =>
      replaceArg(o, "router", "--prefill-dns", "--prefill-dns=tandem-prefill:50061");
    assertCatches(checkRouterDiscovery, wrongPort,
                  /--prefill-dns port 50061 is not a port of Service tandem-prefill/);
    assertCatches(checkRouterDiscovery, wrongPort, /container prefill serves gRPC on 50071/);
  });
  it("fails a discovery Service that is not headless, or selects the wrong pods", () => {
    assertCatches(checkRouterDiscovery,
      (o) => { delete get(o, "Service", "tandem-decode").spec.clusterIP; },
      /--decode-dns names Service tandem-decode, which is not headless/);
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--decode-dns", "--decode-dns=tandem-prefill:50071"),
      /--decode-dns Service tandem-prefill selects no tandem-decode pods/);
  });
  it("needs no --prefill-dns in colocated mode", () => {
    const objects = good();
    replaceArg(objects, "router", "--prefill-dns", "--mode=colocated");
    assert.deepEqual(checkRouterDiscovery(objects, CTX), []);
  });
  it("fails a router without --decode-dns or (disaggregated) --prefill-dns", () => {
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--prefill-dns"),
      /no --prefill-dns/);
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--decode-dns"),
      /no --decode-dns/);
  });
  it("fails a node preStop sleep shorter than the router's DNS refresh", () => {
    assertCatches(checkRouterDiscovery,
      (o) => { container(o, "router").args.push("--dns-refresh-ms=15000"); },
      /container decode: preStop sleep 10 s is shorter than the router's --dns-refresh-ms 15000/);
  });
});

describe("9. PDBs and HPAs", () => {
  const pdbSpec = (o, role) => get(o, "PodDisruptionBudget", `tandem-${role}`).spec;
  it("fails a PDB that selects nothing, or blocks every eviction", () => {
    assertCatches(checkDisruptionAndScaling,
      (o) => { pdbSpec(o, "router").selector.matchLabels["app.kubernetes.io/component"] = "gw"; },
      /PodDisruptionBudget\/tandem-router: selector matches no workload's pods/);
    assertCatches(checkDisruptionAndScaling,
      (o) => {
        delete pdbSpec(o, "prefill").maxUnavailable;
        pdbSpec(o, "prefill").minAvailable = 2;
      },
      /PodDisruptionBudget\/tandem-prefill: allows no voluntary eviction/);
  });
  it("fails an HPA whose target is not in the render", () => {
    assertCatches(checkDisruptionAndScaling,
      (o) => { get(o, "HorizontalPodAutoscaler", "tandem-decode").spec.scaleTargetRef.name = "d"; },
      /scaleTargetRef apps\/v1 Deployment\/d is not in the render/);
  });
  it("fails a Deployment whose selector misses its own pods", () => {
    assertCatches(checkDisruptionAndScaling,
      (o) => { get(o, "Deployment", "tandem-router").spec.selector.matchLabels.extra = "x"; },
      /Deployment\/tandem-router: spec.selector does not select its own pod template/);
  });
  it("9b: fails an HPA-scaled Deployment that sets spec.replicas", () => {
    assertCatches(checkHpaTargetsOmitReplicas,
      (o) => { get(o, "Deployment", "tandem-decode").spec.replicas = 2; },
      /Deployment\/tandem-decode: sets spec.replicas 2 but HorizontalPodAutoscaler\/tandem-decode/);
  });
});
