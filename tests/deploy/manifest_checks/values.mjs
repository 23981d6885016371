// Field values of Kubernetes objects that need parsing: resource quantities ("250m", "8Gi"), the
// seconds a preStop hook sleeps, and what is wrong with an image reference (no tag, `latest`).

import path from "node:path";

const QUANTITY_SUFFIX = {
  n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

// A Kubernetes resource quantity ("250m", "8Gi", "16k", 2) as a number; NaN if malformed.
export function parseQuantity(q) {
  if (typeof q === "number") return q;
  if (typeof q !== "string") return NaN;
  const number = /^([+-]?(?:\d+\.?\d*|\.\d+))/.source;
  const suffix = /(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/.source;
  const m = new RegExp(number + suffix).exec(q.trim());
  if (!m) return NaN;
  let v = Number(m[1]);
  if (m[2]) v *= 10 ** Number(m[2].slice(1));
  else if (m[3]) v *= QUANTITY_SUFFIX[m[3]];
  return v;
}

// Seconds a preStop hook takes when it is a plain sleep (exec `sleep N`, `sh -c "sleep N"`, or the
// native `sleep: {seconds: N}`); 0 without a preStop hook; null for a hook we cannot time.
export function preStopSleepSeconds(container) {
  const hook = container.lifecycle?.preStop;
  if (!hook) return 0;
  if (hook.sleep?.seconds !== undefined) return Number(hook.sleep.seconds);
  const cmd = hook.exec?.command;
  let m = null;
  if (Array.isArray(cmd) && cmd.length === 2 && path.posix.basename(cmd[0]) === "sleep") {
    m = /^(\d+(?:\.\d+)?)s?$/.exec(String(cmd[1]));
  } else if (Array.isArray(cmd) && cmd.length === 3 && /(^|\/)(ba|da)?sh$/.test(cmd[0]) &&
             cmd[1] === "-c") {
    m = /^\s*(?:exec\s+)?sleep\s+(\d+(?:\.\d+)?)s?\s*$/.exec(String(cmd[2]));
  }
  return m ? Number(m[1]) : null;
}

// What is wrong with an image reference (no tag, `latest`), or null. A digest pins it too.
export function imageProblem(image) {
  if (typeof image !== "string" || image === "") return "has no image";
  const at = image.indexOf("@");
  if (at >= 0) {
    return /^sha256:[0-9a-f]{64}$/.test(image.slice(at + 1)) ? null
                                                             : `image ${image}: malformed digest`;
  }
  const colon = image.indexOf(":", image.lastIndexOf("/") + 1);
  if (colon < 0) return `image ${image} has no tag (it means :latest)`;
  const tag = image.slice(colon + 1);
  if (tag === "") return `image ${image} has an empty tag`;
  if (tag === "latest") return `image ${image} uses the latest tag`;
  return null;
}
