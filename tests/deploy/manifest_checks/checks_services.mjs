// The invariant checks of how pods are found and kept: 7. Services select one workload's pods and
// target their ports (headless for prefill and decode); 8. the router's DNS discovery names those
// headless Services; 9. Deployments select their pods, PDBs allow evictions, HPAs target workloads
// of the render; 9b. HPA-scaled workloads leave spec.replicas unset.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { binaryOf, effectiveFlag } from "./flags.mjs";
import {
  NODE_BINARIES,
  containerPort,
  containersOf,
  eachContainer,
  findObject,
  labelSelectorMatches,
  refOf,
  selectedWorkloads,
  workloads,
} from "./objects.mjs";
import { preStopSleepSeconds } from "./values.mjs";

// 7. Every Service selects the pods of exactly one workload, each port's targetPort (a name, or a
// number, or `port` when unset) is a port of that workload's containers, and Services in front of
// prefill or decode pods are headless (the router resolves them to every pod's address).
export function checkServices(objects) {
  const problems = [];
  for (const svc of objects.filter((o) => o?.kind === "Service")) {
    const ref = refOf(svc);
    const selector = svc.spec?.selector;
    if (!selector || Object.keys(selector).length === 0) {
      problems.push(`${ref}: no selector`);
      continue;
    }
    const selected = selectedWorkloads(objects, { matchLabels: selector });
    if (selected.length === 0) {
      problems.push(`${ref}: selector ${JSON.stringify(selector)} matches no workload's pods`);
      continue;
    }
    if (selected.length > 1) {
      problems.push(`${ref}: selector matches the pods of ${selected.map((w) => w.ref).join(", ")}`);
    }
    for (const w of selected) {
      const ports = containersOf(w.pod).flatMap((c) => c.ports ?? []);
      for (const p of svc.spec.ports ?? []) {
        const target = p.targetPort ?? p.port;
        const ok = typeof target === "string" ? ports.some((cp) => cp.name === target)
                                              : ports.some((cp) => cp.containerPort === target);
        if (!ok) {
          problems.push(`${ref}: port ${p.name ?? p.port} targets ${JSON.stringify(target)}, ` +
                        `which no container of ${w.ref} declares`);
        }
      }
      const nodes = containersOf(w.pod).map(binaryOf).filter((b) => NODE_BINARIES.has(b));
      if (nodes.length && svc.spec.clusterIP !== "None") {
        problems.push(`${ref}: selects ${nodes.join(", ")} pods, so it must be headless ` +
                      `(clusterIP: None): the router needs every pod's address from DNS`);
      }
    }
  }
  return problems;
}

const DISCOVERY = [
  ["--decode-dns", "tandem-decode"],
  ["--prefill-dns", "tandem-prefill"],
];

// 8. The router's --prefill-dns / --decode-dns NAME:PORT name a headless Service of the render
// that has port PORT and selects pods of the matching node binary whose grpc port is PORT (the
// router connects to PORT on each pod address). --decode-dns is required, --prefill-dns too
// unless --mode colocated. Those pods' preStop sleep covers the router's --dns-refresh-ms, so
// the router has dropped a pod before it starts draining.
export function checkRouterDiscovery(objects, ctx) {
  const problems = [];
  const help = ctx.helps["tandem-router"];
  for (const { c, where } of eachContainer(objects)) {
    if (binaryOf(c) !== "tandem-router") continue;
    const mode = effectiveFlag(c, "--mode", help)?.value ?? "disaggregated";
    const refreshMs = Number(effectiveFlag(c, "--dns-refresh-ms", help)?.value);
    for (const [flag, nodeBinary] of DISCOVERY) {
      const given = effectiveFlag(c, flag, help);
      if (!given || given.source !== "args") {
        if (flag === "--decode-dns" || mode !== "colocated") {
          problems.push(`${where}: no ${flag} (the ${nodeBinary} pods are found through it)`);
        }
        continue;
      }
      const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[^:]*)?:(\d+)$/.exec(given.value);
      if (!m) {
        problems.push(`${where}: ${flag} '${given.value}' is not NAME:PORT`);
        continue;
      }
      const [name, port] = [m[1], Number(m[4])];
      const svc = findObject(objects, "Service", name);
      if (!svc) {
        problems.push(`${where}: ${flag} names Service ${name}, which is not in the render`);
        continue;
      }
      if (svc.spec?.clusterIP !== "None") {
        problems.push(`${where}: ${flag} names Service ${name}, which is not headless`);
      }
      if (!(svc.spec?.ports ?? []).some((p) => p.port === port)) {
        problems.push(`${where}: ${flag} port ${port} is not a port of Service ${name}`);
      }
      const nodes = selectedWorkloads(objects, { matchLabels: svc.spec?.selector ?? {} })
        .flatMap((w) => containersOf(w.pod).map((n) => ({ w, n })))
        .filter(({ n }) => binaryOf(n) === nodeBinary);
      if (nodes.length === 0) {
        problems.push(`${where}: ${flag} Service ${name} selects no ${nodeBinary} pods`);
      }
      for (const { w, n } of nodes) {
        const grpc = containerPort(n, "grpc");
        if (grpc !== port) {
          problems.push(`${where}: ${flag} port ${port}, but ${w.ref} container ${n.name} ` +
                        `serves gRPC on ${grpc}`);
        }
        const sleep = preStopSleepSeconds(n);
        if (Number.isFinite(refreshMs) && sleep !== null && sleep * 1000 < refreshMs) {
          problems.push(`${w.ref} container ${n.name}: preStop sleep ${sleep} s is shorter than ` +
                        `the router's --dns-refresh-ms ${refreshMs}: it drains while routers ` +
                        `still send it requests`);
        }
      }
    }
  }
  return problems;
}

// 9. Every Deployment's selector selects its own pod template; every PodDisruptionBudget selects
// some workload's pods and still allows an eviction; every HorizontalPodAutoscaler scales a
// workload of the render, with minReplicas <= maxReplicas.
export function checkDisruptionAndScaling(objects) {
  const problems = [];
  for (const w of workloads(objects)) {
    if (w.obj.spec?.selector && !labelSelectorMatches(w.obj.spec.selector, w.pod.metadata?.labels)) {
      problems.push(`${w.ref}: spec.selector does not select its own pod template's labels`);
    }
  }
  for (const pdb of objects.filter((o) => o?.kind === "PodDisruptionBudget")) {
    const selected = selectedWorkloads(objects, pdb.spec?.selector);
    if (selected.length === 0) {
      problems.push(`${refOf(pdb)}: selector matches no workload's pods`);
      continue;
    }
    const replicas = selected.reduce((n, w) => n + (w.obj.spec?.replicas ?? 1), 0);
    const { maxUnavailable, minAvailable } = pdb.spec ?? {};
    if (maxUnavailable === 0 || maxUnavailable === "0%" ||
        (typeof minAvailable === "number" && minAvailable >= replicas) || minAvailable === "100%") {
      problems.push(`${refOf(pdb)}: allows no voluntary eviction (node drains would hang)`);
    }
  }
  for (const hpa of objects.filter((o) => o?.kind === "HorizontalPodAutoscaler")) {
    const target = hpa.spec?.scaleTargetRef ?? {};
    const found = objects.find((o) => o?.kind === target.kind && o.metadata?.name === target.name &&
                                      (!target.apiVersion || o.apiVersion === target.apiVersion));
    if (!found) {
      problems.push(`${refOf(hpa)}: scaleTargetRef ${target.apiVersion} ${target.kind}/` +
                    `${target.name} is not in the render`);
    }
    if ((hpa.spec?.minReplicas ?? 1) > hpa.spec?.maxReplicas) {
      problems.push(`${refOf(hpa)}: minReplicas ${hpa.spec.minReplicas} > maxReplicas ` +
                    `${hpa.spec.maxReplicas}`);
    }
  }
  return problems;
}

// 9b. A workload that a HorizontalPodAutoscaler scales leaves spec.replicas unset: otherwise
// every `kubectl apply` resets the replica count the HPA chose (the Kubernetes documentation's
// advice for HPA-managed Deployments), e.g. scaling a loaded decode pool back down mid-traffic.
export function checkHpaTargetsOmitReplicas(objects) {
  const problems = [];
  for (const hpa of objects.filter((o) => o?.kind === "HorizontalPodAutoscaler")) {
    const target = hpa.spec?.scaleTargetRef ?? {};
    const found = findObject(objects, target.kind, target.name);
    if (found?.spec?.replicas !== undefined) {
      problems.push(`${refOf(found)}: sets spec.replicas ${found.spec.replicas} but ` +
                    `${refOf(hpa)} scales it; each kubectl apply would reset the HPA's count ` +
                    `(remove /spec/replicas where the HPA is added)`);
    }
  }
  return problems;
}
