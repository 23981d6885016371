// The invariant checks of containers' images, resources and security: 4. images are pinned;
// 5. cpu and memory requests and limits (extended resources request their limit); 6. pod
// security (non-root, no privilege escalation, read-only root with a writable /tmp).
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import path from "node:path";

import { eachContainer } from "./objects.mjs";
import { imageProblem, parseQuantity } from "./values.mjs";

// 4. No image uses the `latest` tag or lacks a tag (a digest is fine).
export function checkImages(objects) {
  const problems = [];
  for (const { c, where } of eachContainer(objects, { init: true })) {
    const problem = imageProblem(c.image);
    if (problem) problems.push(`${where}: ${problem}`);
  }
  return problems;
}

const NATIVE_RESOURCES = /^(cpu|memory|ephemeral-storage|hugepages-.*)$/;

// 5. Every container requests and limits cpu and memory, requests <= limits, and extended
// resources (nvidia.com/gpu) request exactly their limit, as the API server demands.
export function checkResources(objects) {
  const problems = [];
  for (const { c, where } of eachContainer(objects, { init: true })) {
    const requests = c.resources?.requests ?? {};
    const limits = c.resources?.limits ?? {};
    for (const [section, values] of [["requests", requests], ["limits", limits]]) {
      for (const r of ["cpu", "memory"]) {
        if (values[r] === undefined) problems.push(`${where}: no resources.${section}.${r}`);
      }
      for (const [r, q] of Object.entries(values)) {
        if (Number.isNaN(parseQuantity(q))) {
          problems.push(`${where}: resources.${section}.${r} '${q}' is not a quantity`);
        }
      }
    }
    for (const [r, q] of Object.entries(requests)) {
      if (NATIVE_RESOURCES.test(r)) {
        if (limits[r] !== undefined && parseQuantity(q) > parseQuantity(limits[r])) {
          problems.push(`${where}: requests ${r} ${q} exceeds its limit ${limits[r]}`);
        }
      } else if (limits[r] === undefined || parseQuantity(q) !== parseQuantity(limits[r])) {
        problems.push(`${where}: extended resource ${r} requests ${q} but limits ` +
                      `${limits[r] ?? "nothing"}: they must be equal`);
      }
    }
  }
  return problems;
}

const normalizeMountPath = (p) => path.posix.normalize(String(p)).replace(/(.)\/$/, "$1");

// 6. Pod security: runAsNonRoot (pod or container), allowPrivilegeEscalation false, not
// privileged, readOnlyRootFilesystem true, and then a writable volume mounted at /tmp.
export function checkPodSecurity(objects) {
  const problems = [];
  for (const { w, c, where } of eachContainer(objects, { init: true })) {
    const podSc = w.pod.spec?.securityContext ?? {};
    const sc = c.securityContext ?? {};
    if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) !== true) {
      problems.push(`${where}: runAsNonRoot is not true (pod or container securityContext)`);
    }
    if ((sc.runAsUser ?? podSc.runAsUser) === 0) problems.push(`${where}: runAsUser is 0 (root)`);
    if (sc.allowPrivilegeEscalation !== false) {
      problems.push(`${where}: securityContext.allowPrivilegeEscalation is not false`);
    }
    if (sc.privileged === true) problems.push(`${where}: runs privileged`);
    if (sc.readOnlyRootFilesystem !== true) {
      problems.push(`${where}: securityContext.readOnlyRootFilesystem is not true`);
      continue;
    }
    const tmp = (c.volumeMounts ?? []).find((m) => normalizeMountPath(m.mountPath) === "/tmp");
    if (!tmp) {
      problems.push(`${where}: read-only root filesystem but no volume mounted at /tmp`);
    } else if (tmp.readOnly) {
      problems.push(`${where}: /tmp is mounted read-only`);
    } else if (!(w.pod.spec?.volumes ?? []).some((v) => v.name === tmp.name)) {
      problems.push(`${where}: /tmp mounts volume ${tmp.name}, which the pod does not define`);
    }
  }
  return problems;
}
