// Unit tests of manifest_checks.mjs's NetworkPolicy checks (19. policies select pods and name
// ports they use, 20. the connections tandem needs are allowed and node ports stay closed to
// everyone else) and of the NetworkPolicy semantics they rest on: each passes the correct fixture
// (goodSecure(): good() with components/network-policies' policies) and fails, saying why, on a
// copy broken in one place.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  EXTERNAL,
  allowed,
  checkNetworkFlows,
  checkNetworkPolicies,
  cidrContains,
  policyTypes,
  requirePackages,
  workloadPrincipals,
} from "./manifest_checks.mjs";
import {
  CTX,
  assertCatches,
  container,
  get,
  good,
  goodSecure,
  replaceArg,
} from "./manifest_checks/fixtures.mjs";

await requirePackages();

const secure = { base: goodSecure };
const policy = (o, role) => get(o, "NetworkPolicy", `tandem-${role}`);

describe("NetworkPolicy semantics", () => {
  it("policyTypes default, CIDRs", () => {
    assert.deepEqual(policyTypes({ spec: {} }), ["Ingress"]);
    assert.deepEqual(policyTypes({ spec: { egress: [] } }), ["Ingress", "Egress"]);
    assert.ok(cidrContains("0.0.0.0/0", "203.0.113.10"));
    assert.ok(cidrContains("10.244.0.0/16", "10.244.9.10"));
    assert.ok(!cidrContains("10.0.0.0/16", "10.244.9.10"));
  });
  it("evaluates ingress and egress, named ports, ranges and peers", () => {
    const o = goodSecure();
    const [router, prefill, decode] = ["router", "prefill", "decode"].map((r) =>
      workloadPrincipals(o).find((p) => p.name === `Deployment/tandem-${r}`));
    assert.ok(allowed(o, router, decode, 50061).ok, "router -> decode grpc");
    assert.deepEqual(allowed(o, prefill, decode, 50061),
                     { ok: false, side: "egress", policies: ["NetworkPolicy/tandem-prefill"] });
    assert.ok(allowed(o, prefill, decode, 50150).ok, "prefill -> decode UCX");
    assert.ok(!allowed(o, prefill, decode, 50200).ok, "past the range");
    assert.ok(allowed(o, EXTERNAL.prometheus, decode, 9401).ok, "Prometheus -> metrics");
    assert.ok(!allowed(o, EXTERNAL.clientPod, decode, 9401).ok, "a client pod -> metrics");
    assert.ok(allowed(o, EXTERNAL.outsideClient, router, 8000).ok, "clients -> router http");
    assert.ok(allowed(o, router, EXTERNAL.dns, 53, "UDP").ok, "router -> DNS");
    assert.ok(!allowed(o, router, EXTERNAL.dns, 5353, "UDP").ok);
    // Without policies everything is open.
    assert.ok(allowed(good(), prefill, decode, 50061).ok);
  });
});

describe("19. NetworkPolicies select pods and name ports they use", () => {
  it("passes a render without NetworkPolicies", () => {
    assert.deepEqual(checkNetworkPolicies(good(), CTX), []);
  });
  it("fails a policy or a peer that selects no pods", () => {
    assertCatches(checkNetworkPolicies,
      (o) => { policy(o, "decode").spec.podSelector.matchLabels["app.kubernetes.io/component"] = "decoder"; },
      /NetworkPolicy\/tandem-decode: podSelector .*decoder.* matches no workload's pods/, secure);
    assertCatches(checkNetworkPolicies,
      (o) => { policy(o, "prefill").spec.ingress[0].from[0].podSelector.matchLabels["app.kubernetes.io/component"] = "routr"; },
      /NetworkPolicy\/tandem-prefill: ingress rule 1: from podSelector .*routr.* matches no workload's pods/,
      secure);
  });
  it("fails a port name the pods do not declare", () => {
    assertCatches(checkNetworkPolicies,
      (o) => { policy(o, "decode").spec.ingress[0].ports[0].port = "gprc"; },
      /tandem-decode: ingress rule 1: port 'gprc'\/TCP is not a port of Deployment\/tandem-decode's containers/,
      secure);
    assertCatches(checkNetworkPolicies,
      (o) => { policy(o, "router").spec.egress[0].ports[0].port = "http"; },
      /tandem-router: egress rule 1: port 'http'\/TCP is not a port of Deployment\/tandem-prefill's containers/,
      secure);
  });
  it("fails a port range that is not the pods' --kv-port-range, and a port they do not use", () => {
    assertCatches(checkNetworkPolicies,
      (o) => { policy(o, "decode").spec.ingress[1].ports[0].endPort = 50149; },
      /ingress rule 2: port range 50100-50149\/TCP is not the UCX port range of Deployment\/tandem-decode's containers \(--kv-port-range 50100-50199\)/,
      secure);
    assertCatches(checkNetworkPolicies,
      (o) => replaceArg(o, "prefill", "--kv-port-range", "--kv-port-range=50300-50399"),
      /tandem-decode: egress rule 1: port range 50100-50199\/TCP is not the UCX port range of Deployment\/tandem-prefill's containers \(--kv-port-range 50300-50399\)/,
      secure);
    assertCatches(checkNetworkPolicies,
      (o) => { policy(o, "decode").spec.ingress[2].ports = [{ port: 9402 }]; },
      /ingress rule 3: port 9402\/TCP is neither a container port of Deployment\/tandem-decode nor in its --kv-port-range/,
      secure);
  });
});

describe("20. NetworkPolicies allow tandem's traffic and keep node ports closed", () => {
  it("passes a render without NetworkPolicies", () => {
    assert.deepEqual(checkNetworkFlows(good(), CTX), []);
  });
  it("fails a policy set that blocks what tandem needs", () => {
    assertCatches(checkNetworkFlows,
      (o) => { policy(o, "router").spec.egress.splice(1, 1); },
      /block Deployment\/tandem-router -> Deployment\/tandem-decode port 50061\/TCP \(the router calls every node\): the egress of NetworkPolicy\/tandem-router/,
      secure);
    assertCatches(checkNetworkFlows,
      (o) => { policy(o, "prefill").spec.ingress.splice(1, 1); },
      /block Deployment\/tandem-decode -> Deployment\/tandem-prefill port 50100\/TCP \(KV moves over UCX/,
      secure);
    assertCatches(checkNetworkFlows,
      (o) => { policy(o, "router").spec.egress.pop(); },
      /block Deployment\/tandem-router -> the cluster DNS port 53\/UDP/, secure);
    assertCatches(checkNetworkFlows,
      (o) => { policy(o, "router").spec.ingress[0].from = [{ podSelector: {} }]; },
      /block a client outside the cluster -> Deployment\/tandem-router port 8000\/TCP/, secure);
    assertCatches(checkNetworkFlows,
      (o) => { policy(o, "decode").spec.ingress.pop(); },
      /block Prometheus -> Deployment\/tandem-decode port 9401\/TCP/, secure);
  });
  it("fails a node gRPC or UCX port that others than the router or the other pool reach", () => {
    assertCatches(checkNetworkFlows,
      (o) => { policy(o, "decode").spec.ingress[0].from.push({ namespaceSelector: {} }); },
      /let a client pod in another namespace reach Deployment\/tandem-decode port 50061\/TCP \(only the router may call a node\)/,
      secure);
    assertCatches(checkNetworkFlows,
      (o) => { o.splice(o.indexOf(policy(o, "prefill")), 1); },
      /let a client outside the cluster reach Deployment\/tandem-prefill port 50071\/TCP/, secure);
    assertCatches(checkNetworkFlows,
      (o) => { delete policy(o, "decode").spec.ingress[1].from; },
      /let a client pod in another namespace reach Deployment\/tandem-decode port 50100\/TCP \(only the other pool may reach a node's UCX ports\)/,
      secure);
    assertCatches(checkNetworkFlows,
      (o) => { delete policy(o, "prefill").spec.ingress[2].ports; },
      /let Prometheus reach Deployment\/tandem-prefill port 40000\/TCP \(a port the node does not declare\)/,
      secure);
  });
  it("fails node pods without --kv-port-range", () => {
    assertCatches(checkNetworkFlows,
      (o) => replaceArg(o, "decode", "--kv-port-range"),
      /Deployment\/tandem-decode: no --kv-port-range: UCX would listen on a random port/, secure);
  });
});

describe("goodSecure()", () => {
  it("is good() plus TLS, NetworkPolicies and API keys", () => {
    assert.equal(goodSecure().filter((x) => x.kind === "NetworkPolicy").length, 3);
    assert.ok(container(goodSecure(), "router").args.includes("--api-key-file=/etc/tandem/api-keys/keys"));
  });
});
