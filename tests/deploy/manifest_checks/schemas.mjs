// Schema validation of rendered objects against the Kubernetes and Prometheus Operator OpenAPI
// schemas (the kubernetes-models classes), including fields the schemas do not have (typos), which
// the generated schemas alone would let through.

import { refOf } from "./objects.mjs";

const MODEL_PACKAGES = ["kubernetes-models", "@kubernetes-models/prometheus-operator"];

// The kubernetes-models class for apiVersion + kind, or null when no installed package has one.
export async function modelClass(apiVersion, kind) {
  if (!/^([a-z0-9.-]+\/)?v\d+((alpha|beta)\d+)?$/.test(apiVersion ?? "") ||
      !/^[A-Z][A-Za-z0-9]*$/.test(kind ?? "")) {
    return null;
  }
  for (const pkg of MODEL_PACKAGES) {
    let mod;
    try {
      mod = await import(`${pkg}/${apiVersion}/${kind}`);
    } catch (e) {
      if (e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED" || e.code === "ERR_MODULE_NOT_FOUND") continue;
      throw e;
    }
    const cls = mod[kind];
    if (cls && cls.apiVersion === apiVersion && cls.kind === kind) return cls;
  }
  return null;
}

// A proxy of `obj` (deeply) that records in `seen` the path of every own property read.
function recordReads(obj, at, seen) {
  if (obj === null || typeof obj !== "object") return obj;
  return new Proxy(obj, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof key !== "string" || !Object.hasOwn(target, key)) return value;
      seen.add(`${at}/${key}`);
      return recordReads(value, `${at}/${key}`, seen);
    },
  });
}

// Paths of the own properties of `obj` that were never read, topmost only.
function unreadPaths(obj, at, seen, out) {
  if (obj === null || typeof obj !== "object") return out;
  for (const key of Object.keys(obj)) {
    const p = `${at}/${key}`;
    if (!seen.has(p)) out.push(p);
    else unreadPaths(obj[key], p, seen, out);
  }
  return out;
}

// Validates every object against its OpenAPI schema: `new Model(obj).validate()` of the
// matching kubernetes-models class (ajv; throws a ValidationError listing every violation). The
// generated schemas allow unknown fields, which `kubectl apply` (strict field validation) and the
// API server reject, so validation runs on a proxy that records which fields the validator reads:
// a field it never reads is not in the schema (a typo like `readinesProbe`). An object whose
// apiVersion/kind has no model is a problem, never skipped.
export async function validateSchemas(objects) {
  const problems = [];
  for (const obj of objects) {
    const ref = `${obj?.apiVersion} ${refOf(obj)}`;
    const cls = await modelClass(obj?.apiVersion, obj?.kind);
    if (!cls) {
      problems.push(`${ref}: no schema for apiVersion ${obj?.apiVersion} kind ${obj?.kind}`);
      continue;
    }
    const model = new cls(obj);
    const seen = new Set();
    try {
      model.validate.call(recordReads(model, "", seen));
    } catch (e) {
      problems.push(`${ref}: ${e.message}`);
      continue;
    }
    for (const p of unreadPaths(model, "", seen, [])) {
      problems.push(`${ref}: unknown field ${p} (not in the ${obj.apiVersion} ${obj.kind} schema)`);
    }
  }
  return problems;
}
