// The invariant checks of references by name: 12. every $(VAR) in a container's command, args and
// env resolves, and its envFrom / valueFrom references exist; 15. the volumes, PVCs, ConfigMaps,
// Secrets and ServiceAccount a pod refers to are in the render, except the Secrets the operator
// creates (OPERATOR_SECRETS, documented in deploy/README.md), and the keys it reads exist.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { containerEnv, varReferences } from "./env.mjs";
import { allContainersOf, eachContainer, findObject, workloads } from "./objects.mjs";
import { OPERATOR_SECRETS, findSecret, keysOf } from "./secrets.mjs";

// 12. Every $(VAR) in a container's command, args and env values resolves to one of its env
// vars or a key of a ConfigMap it envFroms (otherwise Kubernetes passes "$(VAR)" verbatim), and
// every envFrom / valueFrom reference exists in the render.
export function checkEnvReferences(objects) {
  const problems = [];
  for (const { c, where } of eachContainer(objects, { init: true })) {
    const { env, problems: refProblems } = containerEnv(c, objects);
    problems.push(...refProblems.map((p) => `${where}: ${p}`));
    const texts = [...(c.command ?? []), ...(c.args ?? []),
                   ...(c.env ?? []).map((e) => e.value ?? "")];
    for (const text of texts) {
      for (const name of varReferences(text)) {
        if (!env.has(name)) {
          problems.push(`${where}: '${text}' refers to $(${name}), which is neither an env var ` +
                        `nor a key of a ConfigMap it envFroms`);
        }
      }
    }
  }
  return problems;
}

// 15. Everything a pod refers to by name is in the render: the volumes its containers mount, the
// PersistentVolumeClaims, ConfigMaps and Secrets its volumes use, its ServiceAccount. A Secret may
// instead be one the operator creates (OPERATOR_SECRETS: never committed, created as
// deploy/README.md says); any other Secret missing from the render is a problem, so a manifest
// cannot quietly depend on a Secret nobody is told to create. The keys a volume's items name must
// be keys of the Secret or ConfigMap (for an operator Secret: the keys the guide documents).
export function checkReferences(objects) {
  const problems = [];
  for (const w of workloads(objects)) {
    const spec = w.pod.spec ?? {};
    const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
    for (const c of allContainersOf(w.pod)) {
      for (const m of c.volumeMounts ?? []) {
        if (!volumes.has(m.name)) {
          problems.push(`${w.ref} container ${c.name}: mounts volume ${m.name}, which the pod ` +
                        `does not define`);
        }
      }
    }
    const checkSource = (v, kind, src) => {
      const name = kind === "Secret" ? (src.secretName ?? src.name) : src.name;
      const obj = kind === "Secret" ? findSecret(objects, name) : findObject(objects, kind, name);
      if (!obj) {
        if (src.optional) return;
        problems.push(kind === "Secret"
          ? `${w.ref}: volume ${v.name} uses Secret ${name}, which is neither in the render nor ` +
            `one the operator creates (${[...OPERATOR_SECRETS.keys()].join(", ")}; ` +
            `deploy/README.md#secrets-the-operator-creates)`
          : `${w.ref}: volume ${v.name} uses ${kind} ${name}, not in the render`);
        return;
      }
      const keys = keysOf(obj);
      for (const item of src.items ?? []) {
        if (!keys.includes(item.key) && !src.optional) {
          problems.push(`${w.ref}: volume ${v.name} reads key ${item.key} of ${kind} ${name}, ` +
                        `which has ${obj.operator ? "(as the deploy guide creates it) " : ""}` +
                        `keys ${keys.join(", ") || "none"}`);
        }
      }
    };
    for (const v of spec.volumes ?? []) {
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim && !findObject(objects, "PersistentVolumeClaim", claim)) {
        problems.push(`${w.ref}: volume ${v.name} claims PersistentVolumeClaim ${claim}, not in ` +
                      `the render`);
      }
      if (v.configMap) checkSource(v, "ConfigMap", v.configMap);
      if (v.secret) checkSource(v, "Secret", v.secret);
      for (const s of v.projected?.sources ?? []) {
        if (s.configMap) checkSource(v, "ConfigMap", s.configMap);
        if (s.secret) checkSource(v, "Secret", s.secret);
      }
    }
    for (const ref of spec.imagePullSecrets ?? []) {
      if (!findSecret(objects, ref.name)) {
        problems.push(`${w.ref}: imagePullSecrets names Secret ${ref.name}, which is neither in ` +
                      `the render nor one the operator creates`);
      }
    }
    const sa = spec.serviceAccountName;
    if (sa && sa !== "default" && !findObject(objects, "ServiceAccount", sa)) {
      problems.push(`${w.ref}: serviceAccountName ${sa} is not in the render`);
    }
  }
  return problems;
}
