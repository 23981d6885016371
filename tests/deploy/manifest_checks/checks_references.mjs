// The invariant checks of references by name: 12. every $(VAR) in a container's command, args and
// env resolves, and its envFrom / valueFrom references exist; 15. the volumes, PVCs, ConfigMaps
// and ServiceAccount a pod refers to are in the render.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { containerEnv, varReferences } from "./env.mjs";
import { allContainersOf, eachContainer, findObject, workloads } from "./objects.mjs";

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
// PersistentVolumeClaims and ConfigMaps its volumes use, its ServiceAccount.
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
    for (const v of spec.volumes ?? []) {
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim && !findObject(objects, "PersistentVolumeClaim", claim)) {
        problems.push(`${w.ref}: volume ${v.name} claims PersistentVolumeClaim ${claim}, not in ` +
                      `the render`);
      }
      const cm = v.configMap;
      if (cm && !cm.optional && !findObject(objects, "ConfigMap", cm.name)) {
        problems.push(`${w.ref}: volume ${v.name} uses ConfigMap ${cm.name}, not in the render`);
      }
    }
    const sa = spec.serviceAccountName;
    if (sa && sa !== "default" && !findObject(objects, "ServiceAccount", sa)) {
      problems.push(`${w.ref}: serviceAccountName ${sa} is not in the render`);
    }
  }
  return problems;
}
