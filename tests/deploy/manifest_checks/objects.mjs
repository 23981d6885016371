// Helpers over rendered Kubernetes objects: the workloads (objects with a pod template) and their
// containers, named container ports, label selectors and the workloads they select, and finding
// an object by kind and name. NODE_BINARIES names the node binaries (prefill and decode).

const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"]);

export const refOf = (o) => `${o?.kind}/${o?.metadata?.name}`;

// Objects with a pod template: [{obj, ref, pod}].
export function workloads(objects) {
  return objects
    .filter((o) => WORKLOAD_KINDS.has(o?.kind) && o.spec?.template)
    .map((o) => ({ obj: o, ref: refOf(o), pod: o.spec.template }));
}

// A pod template's containers, and its init containers followed by its containers.
export const containersOf = (pod) => pod?.spec?.containers ?? [];
export const allContainersOf = (pod) =>
  [...(pod?.spec?.initContainers ?? []), ...containersOf(pod)];

// The containerPort of `container`'s port named `name`, or undefined.
export function containerPort(container, name) {
  return (container.ports ?? []).find((p) => p.name === name)?.containerPort;
}

// Every container of every workload: [{w, c, where}].
export function eachContainer(objects, { init = false } = {}) {
  const out = [];
  for (const w of workloads(objects)) {
    for (const c of init ? allContainersOf(w.pod) : containersOf(w.pod)) {
      out.push({ w, c, where: `${w.ref} container ${c.name}` });
    }
  }
  return out;
}

// Whether a LabelSelector ({matchLabels, matchExpressions}) selects `labels`. An empty selector
// selects everything, as in Kubernetes.
export function labelSelectorMatches(selector, labels = {}) {
  if (!selector) return false;
  labels ??= {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const inValues = has && (e.values ?? []).includes(labels[e.key]);
    if (e.operator === "In" && !inValues) return false;
    if (e.operator === "NotIn" && inValues) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

// The workloads whose pod template labels `selector` selects.
export function selectedWorkloads(objects, selector) {
  return workloads(objects).filter((w) => labelSelectorMatches(selector, w.pod.metadata?.labels));
}

// The object of the render with this kind and metadata.name, or undefined.
export const findObject = (objects, kind, name) =>
  objects.find((o) => o?.kind === kind && o.metadata?.name === name);

// The binaries that run on prefill and decode nodes.
export const NODE_BINARIES = new Set(["tandem-prefill", "tandem-decode"]);
