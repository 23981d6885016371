// The invariant checks of NetworkPolicies: 19. every policy selects pods of the render, every
// same-namespace peer it names selects pods of the render, and every port it names is a port those
// pods use (a declared container port, by name or number, or exactly their UCX --kv-port-range);
// 20. in a render with NetworkPolicies, the connections tandem makes are allowed (clients to the
// router, the router to node gRPC ports and DNS, prefill and decode pods to each other's UCX
// ports, Prometheus to every metrics port) and nothing else reaches the nodes: only the router
// reaches their gRPC ports, only the other pool their UCX ports.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { binaryOf, effectiveFlag } from "./flags.mjs";
import { NODE_BINARIES, containerPort, containersOf, refOf, selectedWorkloads } from "./objects.mjs";
import {
  EXTERNAL,
  allowed,
  kvPortRange,
  networkPolicies,
  workloadPrincipals,
} from "./network.mjs";

const showRange = (r) => (r ? `${r.lo}-${r.hi}` : "none");

// Whether workload `w` uses `rulePort`: a named port its containers declare (same protocol), a
// numeric port they declare or that lies in their --kv-port-range, or a range (endPort) equal to
// their --kv-port-range (a narrower range would drop the connections to the ports UCX picks
// outside it; a wider one opens ports nothing listens on). Returns a problem or null.
function portProblem(rulePort, w, helps) {
  const protocol = rulePort.protocol ?? "TCP";
  const ports = containersOf(w.pod).flatMap((c) => c.ports ?? []);
  const ranges = containersOf(w.pod).map((c) => kvPortRange(c, helps)).filter(Boolean);
  if (rulePort.port === undefined) return null;  // every port
  if (typeof rulePort.port === "string") {
    if (rulePort.endPort !== undefined) return `names port '${rulePort.port}' with an endPort`;
    const ok = ports.some((p) => p.name === rulePort.port && (p.protocol ?? "TCP") === protocol);
    return ok ? null : `port '${rulePort.port}'/${protocol} is not a port of ${w.ref}'s containers ` +
                       `(${ports.map((p) => p.name).join(", ")})`;
  }
  if (rulePort.endPort !== undefined) {
    const r = { lo: rulePort.port, hi: rulePort.endPort };
    if (protocol === "TCP" && ranges.length &&
        ranges.every((k) => k.lo === r.lo && k.hi === r.hi)) {
      return null;
    }
    return `port range ${showRange(r)}/${protocol} is not the UCX port range of ${w.ref}'s ` +
           `containers (--kv-port-range ${ranges.map(showRange).join(", ") || "not set"})`;
  }
  const ok = ports.some((p) => p.containerPort === rulePort.port &&
                               (p.protocol ?? "TCP") === protocol) ||
    (protocol === "TCP" && ranges.some((k) => rulePort.port >= k.lo && rulePort.port <= k.hi));
  return ok ? null : `port ${rulePort.port}/${protocol} is neither a container port of ${w.ref} ` +
                     `nor in its --kv-port-range`;
}

// A peer that can only match pods of the render's namespace (podSelector alone).
const isLocalPeer = (peer) => peer.podSelector && !peer.namespaceSelector && !peer.ipBlock;

// 19. Every NetworkPolicy selects pods of the render; each podSelector-only peer of its rules
// selects pods of the render (a peer that selects nothing admits nothing: a typo in a label
// would cut the router off); each port of an ingress rule is used by every pod the policy
// selects, each port of an egress rule by every pod its local peers select (portProblem).
export function checkNetworkPolicies(objects, ctx) {
  const problems = [];
  for (const np of networkPolicies(objects)) {
    const ref = refOf(np);
    const selected = selectedWorkloads(objects, np.spec?.podSelector ?? {});
    if (selected.length === 0) {
      problems.push(`${ref}: podSelector ${JSON.stringify(np.spec?.podSelector)} matches no ` +
                    `workload's pods`);
    }
    for (const [kind, peersKey] of [["ingress", "from"], ["egress", "to"]]) {
      (np.spec?.[kind] ?? []).forEach((rule, i) => {
        const at = `${ref}: ${kind} rule ${i + 1}`;
        const peers = rule[peersKey] ?? [];
        let destinations = kind === "ingress" ? selected : null;
        for (const peer of peers) {
          if (!isLocalPeer(peer)) continue;
          const matched = selectedWorkloads(objects, peer.podSelector);
          if (matched.length === 0) {
            problems.push(`${at}: ${peersKey} podSelector ${JSON.stringify(peer.podSelector)} ` +
                          `matches no workload's pods`);
          }
        }
        if (kind === "egress" && peers.length > 0 && peers.every(isLocalPeer)) {
          destinations = peers.flatMap((peer) => selectedWorkloads(objects, peer.podSelector));
        }
        for (const rulePort of rule.ports ?? []) {
          for (const w of destinations ?? []) {
            const problem = portProblem(rulePort, w, ctx.helps);
            if (problem) problems.push(`${at}: ${problem}`);
          }
        }
      });
    }
  }
  return problems;
}

// 20. With any NetworkPolicy in the render, evaluate them (network.mjs) for what tandem needs and
// what must stay closed. Needed: clients (outside the cluster, and pods of other namespaces) to
// the router's http and grpc ports; the router to every prefill and decode pod's grpc port, and to
// the cluster DNS (53 UDP and TCP) when it finds nodes by DNS; prefill pods to every port of the
// decode pods' --kv-port-range and decode pods to the prefill pods' (UCX endpoints go both ways);
// Prometheus to every pod's metrics port. Closed: the nodes' grpc ports (and a port they do not
// declare) to anyone but the router; their UCX ports to anyone but the other pool. Node pods
// without --kv-port-range are a problem too (UCX would listen on a random port).
export function checkNetworkFlows(objects, ctx) {
  const problems = [];
  if (networkPolicies(objects).length === 0) return problems;
  const principals = workloadPrincipals(objects);
  const roleOf = (p) => {
    const binaries = containersOf(p.w.pod).map(binaryOf);
    return binaries.find((b) => b === "tandem-router" || NODE_BINARIES.has(b));
  };
  const byRole = (role) => principals.filter((p) => roleOf(p) === role);
  const routers = byRole("tandem-router");
  const prefills = byRole("tandem-prefill");
  const decodes = byRole("tandem-decode");
  const nodes = [...prefills, ...decodes];
  const portOf = (p, name) => containersOf(p.w.pod).map((c) => containerPort(c, name))
    .find((x) => x !== undefined);
  const rangeOf = (p) => containersOf(p.w.pod).map((c) => kvPortRange(c, ctx.helps))
    .find(Boolean) ?? null;
  const need = (src, dst, port, protocol, why) => {
    if (port === undefined) return;
    const r = allowed(objects, src, dst, port, protocol);
    if (!r.ok) {
      problems.push(`NetworkPolicies block ${src.name} -> ${dst.name} port ${port}/${protocol} ` +
                    `(${why}): the ${r.side} of ${r.policies.join(", ")} admits no such ` +
                    `connection`);
    }
  };
  const forbid = (src, dst, port, protocol, what) => {
    if (port === undefined) return;
    if (allowed(objects, src, dst, port, protocol).ok) {
      problems.push(`NetworkPolicies let ${src.name} reach ${dst.name} port ${port}/${protocol} ` +
                    `(${what})`);
    }
  };
  for (const r of routers) {
    for (const client of [EXTERNAL.outsideClient, EXTERNAL.clientPod]) {
      need(client, r, portOf(r, "http"), "TCP", "clients use the router's HTTP API");
      need(client, r, portOf(r, "grpc"), "TCP", "clients use the router's gRPC API");
    }
    for (const n of nodes) need(r, n, portOf(n, "grpc"), "TCP", "the router calls every node");
    const c = containersOf(r.w.pod).find((x) => binaryOf(x) === "tandem-router");
    const help = ctx.helps?.["tandem-router"];
    const usesDns = ["--prefill-dns", "--decode-dns"].some((f) =>
      effectiveFlag(c, f, help)?.source === "args");
    if (usesDns) {
      for (const protocol of ["UDP", "TCP"]) {
        need(r, EXTERNAL.dns, 53, protocol, "the router resolves the nodes' headless Services");
      }
    }
  }
  for (const p of principals) {
    need(EXTERNAL.prometheus, p, portOf(p, "metrics"), "TCP", "Prometheus scrapes it");
  }
  for (const n of nodes) {
    if (!rangeOf(n)) {
      problems.push(`${n.name}: no --kv-port-range: UCX would listen on a random port, which no ` +
                    `NetworkPolicy can admit`);
    }
  }
  const ucxPeers = [[prefills, decodes], [decodes, prefills]];
  for (const [srcs, dsts] of ucxPeers) {
    for (const d of dsts) {
      const range = rangeOf(d);
      if (!range) continue;
      for (const s of srcs) {
        for (let port = range.lo; port <= range.hi; ++port) {
          const before = problems.length;
          need(s, d, port, "TCP", "KV moves over UCX between the pools");
          if (problems.length > before) break;  // one problem per pair, not one per port
        }
      }
    }
  }
  const outsiders = [EXTERNAL.outsideClient, EXTERNAL.clientPod, EXTERNAL.prometheus];
  for (const n of nodes) {
    const role = roleOf(n);
    // A port it does not declare and UCX does not use (as the unadvertised listeners a process
    // may open): closed to everyone but the router.
    const range0 = rangeOf(n);
    let unused = 40000;
    while (n.ports.some((p) => p.containerPort === unused) ||
           (range0 && unused >= range0.lo && unused <= range0.hi)) {
      ++unused;
    }
    for (const x of [...principals.filter((p) => !routers.includes(p) && p !== n), ...outsiders]) {
      forbid(x, n, portOf(n, "grpc"), "TCP", "only the router may call a node");
      forbid(x, n, unused, "TCP", "a port the node does not declare");
    }
    const range = rangeOf(n);
    if (!range) continue;
    const peers = role === "tandem-decode" ? prefills : decodes;
    for (const x of [...principals.filter((p) => !peers.includes(p) && p !== n), ...outsiders]) {
      for (const port of new Set([range.lo, Math.floor((range.lo + range.hi) / 2), range.hi])) {
        forbid(x, n, port, "TCP", "only the other pool may reach a node's UCX ports");
      }
    }
  }
  return problems;
}
