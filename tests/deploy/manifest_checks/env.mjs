// A container's environment, as the kubelet builds it: $(NAME) references in text
// (varReferences) and their expansion (expandVars), and the variables a container sees through
// env, envFrom and valueFrom (containerEnv), with the problems of references outside the render
// (a Secret the operator creates, OPERATOR_SECRETS, counts as in it).

import { findObject } from "./objects.mjs";
import { findSecret } from "./secrets.mjs";

// A ConfigMap of the render, or a Secret of the render or of the operator (OPERATOR_SECRETS).
const findSource = (objects, kind, name) =>
  (kind === "Secret" ? findSecret(objects, name) : findObject(objects, kind, name));

// The names in `text`'s $(NAME) references, as Kubernetes expands them ("$$" escapes a "$").
export function varReferences(text) {
  const names = [];
  const s = String(text);
  for (let i = 0; i < s.length; ++i) {
    if (s[i] !== "$") continue;
    if (s[i + 1] === "$") {
      ++i;
    } else if (s[i + 1] === "(") {
      const close = s.indexOf(")", i + 2);
      if (close < 0) break;
      names.push(s.slice(i + 2, close));
      i = close;
    }
  }
  return names;
}

// `text` with $(NAME) replaced from `env` (a Map), as the kubelet does: unknown references stay as
// they are, "$$" becomes "$".
export function expandVars(text, env) {
  return String(text).replace(/\$\$|\$\(([^)]*)\)/g, (all, name) => {
    if (all === "$$") return "$";
    return env.has(name) ? env.get(name) : all;
  });
}

// The environment a container sees: Map name -> value (fieldRef/resourceFieldRef values are
// placeholders), plus the problems with its envFrom/valueFrom references.
export function containerEnv(container, objects) {
  const env = new Map();
  const problems = [];
  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? "";
    const ref = from.configMapRef ?? from.secretRef;
    const kind = from.configMapRef ? "ConfigMap" : "Secret";
    const obj = ref && findSource(objects, kind, ref.name);
    if (!obj) {
      if (!ref?.optional) {
        problems.push(`envFrom names ${kind} ${ref?.name}, which is not in the render`);
      }
      continue;
    }
    for (const key of [...Object.keys(obj.data ?? {}), ...Object.keys(obj.stringData ?? {})]) {
      env.set(prefix + key, kind === "ConfigMap" ? String(obj.data[key]) : "<secret>");
    }
  }
  for (const e of container.env ?? []) {
    const vf = e.valueFrom;
    if (vf?.configMapKeyRef || vf?.secretKeyRef) {
      const ref = vf.configMapKeyRef ?? vf.secretKeyRef;
      const kind = vf.configMapKeyRef ? "ConfigMap" : "Secret";
      const obj = findSource(objects, kind, ref.name);
      const has = obj && (Object.hasOwn(obj.data ?? {}, ref.key) ||
                          Object.hasOwn(obj.stringData ?? {}, ref.key));
      if (!has && !ref.optional) {
        problems.push(`env ${e.name} reads key ${ref.key} of ${kind} ${ref.name}, not in the render`);
      }
      env.set(e.name, has && kind === "ConfigMap" ? String(obj.data[ref.key]) : `<${e.name}>`);
    } else if (vf) {
      env.set(e.name, `placeholder-${e.name.toLowerCase().replace(/_/g, "-")}`);
    } else {
      env.set(e.name, expandVars(e.value ?? "", env));
    }
  }
  return { env, problems };
}
