// NetworkPolicy semantics over a render, as the Kubernetes documentation defines them, for the
// checks of checks_network.mjs: who a peer (podSelector / namespaceSelector / ipBlock) matches,
// which ports a rule's port entry (number, range with endPort, or a destination pod's port name)
// admits, and whether a connection from one principal to another on a port and protocol is
// allowed by the egress policies selecting its source and the ingress policies selecting its
// destination. Principals are the render's workloads (pods in the render's namespace) and
// stand-ins for the world outside it (EXTERNAL: a client outside the cluster, a client pod in
// another namespace, Prometheus, the cluster DNS).

import { binaryOf, effectiveFlag } from "./flags.mjs";
import { containersOf, labelSelectorMatches, refOf, workloads } from "./objects.mjs";

// The namespace the render is applied to (its name does not matter: pods without a
// namespaceSelector peer match only pods of the policy's own namespace).
const OWN_NAMESPACE = { "kubernetes.io/metadata.name": "tandem" };

// Outside the render. A client outside the cluster is no pod: only an ipBlock matches it.
export const EXTERNAL = {
  outsideClient: { name: "a client outside the cluster", pod: false, ip: "203.0.113.10" },
  clientPod: {
    name: "a client pod in another namespace",
    pod: true,
    labels: { app: "client" },
    nsLabels: { "kubernetes.io/metadata.name": "apps" },
    ip: "10.244.9.10",
  },
  prometheus: {
    name: "Prometheus",
    pod: true,
    labels: { "app.kubernetes.io/name": "prometheus" },
    nsLabels: { "kubernetes.io/metadata.name": "monitoring" },
    ip: "10.244.8.10",
  },
  dns: {
    name: "the cluster DNS",
    pod: true,
    labels: { "k8s-app": "kube-dns" },
    nsLabels: { "kubernetes.io/metadata.name": "kube-system" },
    ip: "10.244.7.10",
    ports: [{ name: "dns", containerPort: 53, protocol: "UDP" },
            { name: "dns-tcp", containerPort: 53, protocol: "TCP" }],
  },
};

// The render's workloads as principals: {name, internal, pod, labels, nsLabels, ip, ports, w}.
export function workloadPrincipals(objects) {
  return workloads(objects).map((w, i) => ({
    name: w.ref,
    internal: true,
    pod: true,
    labels: w.pod.metadata?.labels ?? {},
    nsLabels: OWN_NAMESPACE,
    ip: `10.244.0.${i + 10}`,
    ports: containersOf(w.pod).flatMap((c) => c.ports ?? []),
    w,
  }));
}

// The TCP port range a container's UCX transport listens on (--kv-port-range LO-HI), as
// {lo, hi}, or null when it sets none (UCX then picks any free port).
export function kvPortRange(container, helps) {
  const v = effectiveFlag(container, "--kv-port-range", helps?.[binaryOf(container)])?.value;
  const m = /^(\d+)-(\d+)$/.exec(v ?? "");
  return m ? { lo: Number(m[1]), hi: Number(m[2]) } : null;
}

export const networkPolicies = (objects) => objects.filter((o) => o?.kind === "NetworkPolicy");

// spec.policyTypes, defaulted as the API server does: Ingress, plus Egress when egress rules exist.
export function policyTypes(np) {
  return np.spec?.policyTypes ?? (np.spec?.egress ? ["Ingress", "Egress"] : ["Ingress"]);
}

function ipv4(text) {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text ?? "");
  return m ? m.slice(1).reduce((n, o) => n * 256 + Number(o), 0) : null;
}

// Whether an IPv4 CIDR contains `ip` (IPv6 blocks contain no principal here).
export function cidrContains(cidr, ip) {
  const [base, bits] = String(cidr).split("/");
  const a = ipv4(base);
  const b = ipv4(ip);
  const n = Number(bits);
  if (a === null || b === null || !(n >= 0 && n <= 32)) return false;
  const size = 2 ** (32 - n);
  return Math.floor(a / size) === Math.floor(b / size);
}

// Whether a NetworkPolicyPeer matches principal `p`.
export function peerMatches(peer, p) {
  if (peer.ipBlock) {
    return cidrContains(peer.ipBlock.cidr, p.ip) &&
      !(peer.ipBlock.except ?? []).some((c) => cidrContains(c, p.ip));
  }
  if (!p.pod) return false;
  const nsOk = peer.namespaceSelector ? labelSelectorMatches(peer.namespaceSelector, p.nsLabels)
                                      : p.internal === true;
  const podOk = peer.podSelector ? labelSelectorMatches(peer.podSelector, p.labels) : true;
  return nsOk && podOk;
}

// Whether a NetworkPolicyPort admits `port`/`protocol` on destination `dst` (a principal: named
// ports resolve against its containers' ports).
export function portMatches(rulePort, dst, port, protocol) {
  if ((rulePort.protocol ?? "TCP") !== protocol) return false;
  if (rulePort.port === undefined) return true;
  if (typeof rulePort.port === "number") {
    return port >= rulePort.port && port <= (rulePort.endPort ?? rulePort.port);
  }
  return (dst.ports ?? []).some((p) => p.name === rulePort.port &&
                                       (p.protocol ?? "TCP") === protocol && p.containerPort === port);
}

function ruleAdmits(rule, peersKey, other, dst, port, protocol) {
  const peers = rule[peersKey] ?? [];
  const ports = rule.ports ?? [];
  return (peers.length === 0 || peers.some((peer) => peerMatches(peer, other))) &&
    (ports.length === 0 || ports.some((rp) => portMatches(rp, dst, port, protocol)));
}

// Whether `src` may open a connection to `dst` on port/protocol under the render's policies:
// {ok: true} or {ok: false, side: "egress" | "ingress", policies: [names]}. Policies apply to the
// render's own pods only; with none selecting a pod for a direction, that direction is open.
export function allowed(objects, src, dst, port, protocol = "TCP") {
  const policies = networkPolicies(objects);
  const applying = (p, type) => policies.filter((np) => policyTypes(np).includes(type) &&
    labelSelectorMatches(np.spec?.podSelector ?? {}, p.labels));
  if (src.internal) {
    const egress = applying(src, "Egress");
    if (egress.length && !egress.some((np) => (np.spec.egress ?? []).some((r) =>
      ruleAdmits(r, "to", dst, dst, port, protocol)))) {
      return { ok: false, side: "egress", policies: egress.map(refOf) };
    }
  }
  if (dst.internal) {
    const ingress = applying(dst, "Ingress");
    if (ingress.length && !ingress.some((np) => (np.spec.ingress ?? []).some((r) =>
      ruleAdmits(r, "from", src, dst, port, protocol)))) {
      return { ok: false, side: "ingress", policies: ingress.map(refOf) };
    }
  }
  return { ok: true };
}
