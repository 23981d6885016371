// Checks of tandem's rendered Kubernetes objects (the output of `kubectl kustomize`, parsed into
// plain objects): schema validation against the Kubernetes and Prometheus Operator OpenAPI
// schemas (kubernetes-models), and the invariants an operator relies on (probes, graceful
// shutdown, ports that match the binaries, pinned images, resources, pod security, Services,
// the router's DNS discovery, PDBs and HPAs, metrics scraping, GPUs, $(VAR) references,
// Prometheus rules). Every check is a function of the objects (and a context: the binaries'
// parsed --help, the overlay's kind) that returns a list of problems, one sentence each, so the
// checks can be unit-tested on hand-made broken objects (manifest_checks.test.mjs) and run on
// every render (manifests.test.mjs).
//
// No npm package is imported statically: requirePackages() says what is missing and how to get
// it, instead of an unexplained module-not-found error.

import path from "node:path";
import { isDeepStrictEqual } from "node:util";

export const INSTALL_HINT = "run scripts/install-deps.sh";

// Throws, naming what is missing and INSTALL_HINT, unless tests/deploy/node_modules has the
// packages the deploy tests import.
export async function requirePackages() {
  const missing = [];
  for (const spec of [
    "yaml",
    "kubernetes-models/apps/v1/Deployment",
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor",
  ]) {
    try {
      await import(spec);
    } catch (e) {
      missing.push(`${spec} (${e.code ?? e.message})`);
    }
  }
  if (missing.length) {
    throw new Error(
      `npm packages missing from tests/deploy/node_modules: ${missing.join(", ")}; ${INSTALL_HINT}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// The binaries' --help.

// Parses a tandem binary's --help text into Map<"--flag", {takesValue, default}>. A flag's entry
// starts on a line indented by 1-4 spaces with `--name [METAVAR]`; deeper-indented lines continue
// its description (defaults often wrap: "(default\n   30000)"). `default` is the text after
// "(default " up to ";" or ")", or null when the description gives none.
export function parseHelp(text) {
  const flags = new Map();
  let current = null;
  const finish = () => {
    if (!current) return;
    const description = current.description.replace(/\s+/g, " ");
    const m = /\(default:?\s+([^;)]*)/.exec(description);
    flags.set(current.name, {
      takesValue: current.takesValue,
      default: m ? m[1].trim() : null,
    });
    current = null;
  };
  for (const line of text.split("\n")) {
    const flag = /^ {1,4}(--[A-Za-z0-9][A-Za-z0-9-]*)(?: (\S+))?(?:\s{2,}(.*))?\s*$/.exec(line);
    if (flag) {
      finish();
      current = { name: flag[1], takesValue: flag[2] !== undefined, description: flag[3] ?? "" };
    } else if (current && /^\s{5,}\S/.test(line)) {
      current.description += " " + line.trim();
    } else {
      finish();
    }
  }
  finish();
  return flags;
}

// The binary a container runs: the base name of command[0] (tandem's images set no entrypoint
// arguments), or null.
export function binaryOf(container) {
  const cmd = container.command;
  return Array.isArray(cmd) && typeof cmd[0] === "string" ? path.posix.basename(cmd[0]) : null;
}

// Everything after the binary: command[1..] then args.
export function argsOf(container) {
  return [...(container.command ?? []).slice(1), ...(container.args ?? [])].map(String);
}

// Splits args the way tandem's FlagSet does ("--name=value", "--name value", "--switch"; the last
// occurrence of a flag wins). Returns {flags: [{name, value}], problems}; problems are what the
// binary would refuse (unknown flag, positional argument, a value missing or given to a switch).
export function splitFlags(args, help) {
  const flags = [];
  const problems = [];
  for (let i = 0; i < args.length; ++i) {
    const arg = args[i];
    if (!arg.startsWith("--") || arg === "--") {
      problems.push(`unexpected argument '${arg}' (tandem binaries take only --flags)`);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg : arg.slice(0, eq);
    let value = eq < 0 ? undefined : arg.slice(eq + 1);
    const info = help?.get(name);
    if (help && !info) {
      problems.push(`unknown flag ${name} (not in the binary's --help; it would exit at start)`);
    } else if (info && !info.takesValue && value !== undefined) {
      problems.push(`${name} is a switch and takes no value, got '${arg}'`);
    } else if (info?.takesValue && value === undefined) {
      if (i + 1 >= args.length) {
        problems.push(`${name} needs a value`);
      } else {
        value = args[++i];
      }
    }
    flags.push({ name, value });
  }
  return { flags, problems };
}

// The value a container's binary uses for `flag`: {value, source: "args"} when the container's
// args set it (last occurrence), else {value: default, source: "default"}, or undefined when the
// binary has no such flag.
export function effectiveFlag(container, flag, help) {
  const given = splitFlags(argsOf(container), help).flags.filter((f) => f.name === flag);
  if (given.length) return { value: given[given.length - 1].value ?? "", source: "args" };
  if (!help?.has(flag)) return undefined;
  return { value: help.get(flag).default, source: "default" };
}

// "HOST:PORT" (HOST may be empty or a [bracketed] IPv6 address) -> {host, port}, else null.
export function parseHostPort(text) {
  const m = /^(\[[^\]]*\]|[^:[\]]*):(\d+)$/.exec(String(text ?? ""));
  return m ? { host: m[1], port: Number(m[2]) } : null;
}

function isLoopback(host) {
  return host === "localhost" || host === "[::1]" || /^127\./.test(host);
}

// ---------------------------------------------------------------------------------------------
// Object helpers.

const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"]);

const refOf = (o) => `${o?.kind}/${o?.metadata?.name}`;

// Objects with a pod template: [{obj, ref, pod}].
export function workloads(objects) {
  return objects
    .filter((o) => WORKLOAD_KINDS.has(o?.kind) && o.spec?.template)
    .map((o) => ({ obj: o, ref: refOf(o), pod: o.spec.template }));
}

const containersOf = (pod) => pod?.spec?.containers ?? [];
const allContainersOf = (pod) => [...(pod?.spec?.initContainers ?? []), ...containersOf(pod)];

// The containerPort of `container`'s port named `name`, or undefined.
export function containerPort(container, name) {
  return (container.ports ?? []).find((p) => p.name === name)?.containerPort;
}

// Every container of every workload: [{w, c, where}].
function eachContainer(objects, { init = false } = {}) {
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

function selectedWorkloads(objects, selector) {
  return workloads(objects).filter((w) => labelSelectorMatches(selector, w.pod.metadata?.labels));
}

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

const findObject = (objects, kind, name) =>
  objects.find((o) => o?.kind === kind && o.metadata?.name === name);

// The environment a container sees: Map name -> value (fieldRef/resourceFieldRef values are
// placeholders), plus the problems with its envFrom/valueFrom references.
export function containerEnv(container, objects) {
  const env = new Map();
  const problems = [];
  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? "";
    const ref = from.configMapRef ?? from.secretRef;
    const kind = from.configMapRef ? "ConfigMap" : "Secret";
    const obj = ref && findObject(objects, kind, ref.name);
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
      const obj = findObject(objects, kind, ref.name);
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

// ---------------------------------------------------------------------------------------------
// Schema validation.

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

// ---------------------------------------------------------------------------------------------
// The invariants. Each takes (objects, ctx) and returns a list of problems. ctx.helps maps a
// binary's name to parseHelp() of its --help.

const PROBES = ["startupProbe", "readinessProbe", "livenessProbe"];
const PROBE_HANDLERS = ["grpc", "httpGet", "tcpSocket", "exec"];

// 1. Every container has startup, readiness and liveness probes that are the gRPC health check
// on the container's grpc port.
export function checkProbes(objects) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const grpcPort = containerPort(c, "grpc");
    if (grpcPort === undefined) problems.push(`${where}: no container port named grpc`);
    for (const kind of PROBES) {
      const probe = c[kind];
      if (!probe) {
        problems.push(`${where}: no ${kind}`);
        continue;
      }
      const handlers = PROBE_HANDLERS.filter((h) => probe[h] !== undefined);
      if (!probe.grpc || handlers.length !== 1) {
        problems.push(`${where}: ${kind} uses ${handlers.join(" + ") || "no handler"}, ` +
                      `not the gRPC health check alone (grpc.port)`);
        continue;
      }
      if (grpcPort !== undefined && probe.grpc.port !== grpcPort) {
        problems.push(`${where}: ${kind} checks port ${probe.grpc.port}, but the container's ` +
                      `grpc port is ${grpcPort}`);
      }
    }
  }
  return problems;
}

// 2. terminationGracePeriodSeconds > preStop sleep + drain timeout (--drain-timeout-ms, else the
// binary's default), for every container whose binary drains.
export function checkGracePeriod(objects, ctx) {
  const problems = [];
  for (const { w, c, where } of eachContainer(objects)) {
    const help = ctx.helps[binaryOf(c)];
    if (!help?.has("--drain-timeout-ms")) continue;
    const grace = w.pod.spec?.terminationGracePeriodSeconds ?? 30;
    const sleep = preStopSleepSeconds(c);
    if (sleep === null) {
      problems.push(`${where}: cannot tell how long its preStop hook takes (expected sleep N)`);
      continue;
    }
    const drain = effectiveFlag(c, "--drain-timeout-ms", help);
    const drainMs = Number(drain.value);
    if (!Number.isFinite(drainMs) || drain.value === null || drain.value === "") {
      problems.push(`${where}: --drain-timeout-ms '${drain.value}' (${drain.source}) is not a number`);
      continue;
    }
    if (!(grace > sleep + drainMs / 1000)) {
      problems.push(`${where}: terminationGracePeriodSeconds ${grace} must exceed the preStop ` +
                    `sleep (${sleep} s) + --drain-timeout-ms ${drainMs} (${drain.source}) = ` +
                    `${sleep + drainMs / 1000} s, or the kubelet kills requests still draining`);
    }
  }
  return problems;
}

const PORT_FLAGS = [
  ["grpc", "--listen"],
  ["metrics", "--metrics-listen"],
  ["http", "--http-listen"],
];

// 3. The container ports named grpc / metrics / http are the ports the binary (command[0])
// listens on: --listen / --metrics-listen / --http-listen from the args, else the --help default.
// Port 0 (a random port) and loopback addresses are errors: probes, Services and other pods need
// a fixed port on the pod's address.
export function checkPorts(objects, ctx) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const binary = binaryOf(c);
    if (!binary) {
      problems.push(`${where}: no command: cannot tell which tandem binary it runs`);
      continue;
    }
    const help = ctx.helps[binary];
    if (!help) {
      problems.push(`${where}: runs ${binary}, not a tandem binary this test knows ` +
                    `(${Object.keys(ctx.helps).join(", ")})`);
      continue;
    }
    for (const [name, flag] of PORT_FLAGS) {
      const declared = containerPort(c, name);
      const eff = effectiveFlag(c, flag, help);
      if (!eff) {
        if (declared !== undefined) {
          problems.push(`${where}: declares a port named ${name} but ${binary} has no ${flag}`);
        }
        continue;
      }
      const { value, source } = eff;
      if (value === null) {
        problems.push(`${where}: ${binary} ${flag} has no default in --help and is not set`);
        continue;
      }
      if (value === "") {
        if (declared !== undefined) {
          problems.push(`${where}: declares port ${name} ${declared} but ${flag} is off`);
        }
        continue;
      }
      const hp = parseHostPort(value);
      if (!hp) {
        problems.push(`${where}: ${flag} '${value}' (${source}) is not HOST:PORT`);
        continue;
      }
      if (hp.port === 0) {
        problems.push(`${where}: ${flag} ${value} (${source}) listens on port 0 (a random free ` +
                      `port); Kubernetes needs a fixed one: set ${flag}=0.0.0.0:PORT`);
        continue;
      }
      if (isLoopback(hp.host)) {
        problems.push(`${where}: ${flag} ${value} (${source}) listens on loopback only: ` +
                      `probes, Services and other pods cannot reach it`);
      }
      if (declared === undefined) {
        problems.push(`${where}: ${binary} listens on port ${hp.port} (${flag}, ${source}) but ` +
                      `the container declares no port named ${name}`);
      } else if (declared !== hp.port) {
        problems.push(`${where}: port ${name} is ${declared} but ${binary} listens on ` +
                      `${hp.port} (${flag} ${value}, ${source})`);
      }
    }
  }
  return problems;
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

const NODE_BINARIES = new Set(["tandem-prefill", "tandem-decode"]);

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

// 10. Pods' prometheus.io/port annotation is their metrics containerPort (and prometheus.io/scrape
// comes with a port; prometheus.io/path is /metrics); every PodMonitor selects some workload's
// pods and its endpoints name a port every selected pod has.
export function checkMetricsScraping(objects) {
  const problems = [];
  for (const w of workloads(objects)) {
    const annotations = w.pod.metadata?.annotations ?? {};
    const metricsPorts = containersOf(w.pod).map((c) => containerPort(c, "metrics"))
      .filter((p) => p !== undefined);
    const port = annotations["prometheus.io/port"];
    if (annotations["prometheus.io/scrape"] === "true" && port === undefined) {
      problems.push(`${w.ref}: prometheus.io/scrape without prometheus.io/port`);
    }
    if (port !== undefined && !metricsPorts.includes(Number(port))) {
      problems.push(`${w.ref}: prometheus.io/port ${port}, but its metrics containerPort is ` +
                    `${metricsPorts.join(", ") || "not declared"}`);
    }
    const metricsPath = annotations["prometheus.io/path"];
    if (metricsPath !== undefined && metricsPath !== "/metrics") {
      problems.push(`${w.ref}: prometheus.io/path ${metricsPath}, tandem serves /metrics`);
    }
  }
  for (const pm of objects.filter((o) => o?.kind === "PodMonitor")) {
    const selected = selectedWorkloads(objects, pm.spec?.selector);
    if (selected.length === 0) problems.push(`${refOf(pm)}: selector matches no workload's pods`);
    const endpoints = pm.spec?.podMetricsEndpoints ?? [];
    if (endpoints.length === 0) problems.push(`${refOf(pm)}: no podMetricsEndpoints`);
    for (const ep of endpoints) {
      const target = ep.port ?? ep.portNumber ?? ep.targetPort;
      if (target === undefined) {
        problems.push(`${refOf(pm)}: an endpoint names no port`);
        continue;
      }
      if (ep.path !== undefined && ep.path !== "/metrics") {
        problems.push(`${refOf(pm)}: endpoint path ${ep.path}, tandem serves /metrics`);
      }
      for (const w of selected) {
        const ports = containersOf(w.pod).flatMap((c) => c.ports ?? []);
        const ok = typeof target === "string" ? ports.some((p) => p.name === target)
                                              : ports.some((p) => p.containerPort === target);
        if (!ok) {
          problems.push(`${refOf(pm)}: endpoint port ${JSON.stringify(target)} is not a port ` +
                        `of ${w.ref}'s containers`);
        }
      }
    }
  }
  return problems;
}

// 11. With ctx.gpu: prefill and decode containers request and limit nvidia.com/gpu and run
// --backend cuda, their pods have a nodeSelector, nothing else asks for a GPU. Without: nothing
// mentions nvidia.com/gpu and no container runs --backend cuda. With ctx.builtinModelDir: the
// tandem-config ConfigMap's TANDEM_MODEL_DIR is that directory (the model built into the image).
export function checkAccelerators(objects, ctx) {
  const problems = [];
  for (const { w, c, where } of eachContainer(objects)) {
    const binary = binaryOf(c);
    const isNode = NODE_BINARIES.has(binary);
    const backend = effectiveFlag(c, "--backend", ctx.helps[binary])?.value;
    if (ctx.gpu && isNode) {
      for (const section of ["requests", "limits"]) {
        const q = c.resources?.[section]?.["nvidia.com/gpu"];
        if (!(parseQuantity(q) >= 1)) {
          problems.push(`${where}: no resources.${section}["nvidia.com/gpu"] (got ${q})`);
        }
      }
      if (backend !== "cuda") problems.push(`${where}: --backend is ${backend}, not cuda`);
      if (Object.keys(w.pod.spec?.nodeSelector ?? {}).length === 0) {
        problems.push(`${w.ref}: no nodeSelector for its GPU nodes`);
      }
    } else if (ctx.gpu) {
      if (JSON.stringify(c.resources ?? {}).includes("nvidia.com/gpu")) {
        problems.push(`${where}: asks for a GPU it does not use`);
      }
    } else if (backend === "cuda") {
      problems.push(`${where}: --backend cuda in a render without GPUs`);
    }
  }
  if (!ctx.gpu) {
    for (const o of objects) {
      if (JSON.stringify(o).includes("nvidia.com/gpu")) {
        problems.push(`${refOf(o)}: mentions nvidia.com/gpu in a render without GPUs`);
      }
    }
  }
  if (ctx.builtinModelDir !== undefined) {
    const configs = objects.filter((o) => o?.kind === "ConfigMap" &&
                                          /^tandem-config(-[a-z0-9]+)?$/.test(o.metadata?.name));
    if (configs.length === 0) problems.push(`no tandem-config ConfigMap in the render`);
    for (const cm of configs) {
      const dir = cm.data?.TANDEM_MODEL_DIR;
      if (dir !== ctx.builtinModelDir) {
        problems.push(`${refOf(cm)}: TANDEM_MODEL_DIR is ${dir}, not the image's built-in ` +
                      `${ctx.builtinModelDir}`);
      }
    }
  }
  return problems;
}

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

// 13. Every PrometheusRule's spec.groups equal ctx.prometheusRuleGroups (the `groups` of
// deploy/prometheus/tandem-rules.yml): the PrometheusRule is generated from that file.
export function checkPrometheusRuleGroups(objects, ctx) {
  const problems = [];
  for (const rule of objects.filter((o) => o?.kind === "PrometheusRule")) {
    const diff = firstDifference(rule.spec?.groups, ctx.prometheusRuleGroups, "spec.groups");
    if (diff) {
      problems.push(`${refOf(rule)}: differs from deploy/prometheus/tandem-rules.yml at ${diff} ` +
                    `(re-run deploy/prometheus/make-prometheusrule.sh)`);
    }
  }
  return problems;
}

// The first path where `a` and `b` differ ("spec.groups[1].rules[0].expr: 'x' vs 'y'"), or null.
export function firstDifference(a, b, at = "") {
  if (isDeepStrictEqual(a, b)) return null;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); ++i) {
      const d = firstDifference(a[i], b[i], `${at}[${i}]`);
      if (d) return d;
    }
  } else if (a && b && typeof a === "object" && typeof b === "object" &&
             !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], `${at}.${k}`);
      if (d) return d;
    }
  }
  const show = (v) => (v === undefined ? "(absent)" : JSON.stringify(v));
  return `${at}: ${show(a)} vs ${show(b)}`;
}

// 14. Each container's arguments are flags its binary's --help lists (tandem binaries exit at
// start on an unknown flag), with values where they take one, and no flag is given twice (the
// last would silently win, usually an overlay patch adding what the base already sets).
export function checkArgs(objects, ctx) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const help = ctx.helps[binaryOf(c)];
    if (!help) continue;  // checkPorts reports containers that run no known binary
    const { flags, problems: argProblems } = splitFlags(argsOf(c), help);
    problems.push(...argProblems.map((p) => `${where}: ${p}`));
    const counts = new Map();
    for (const f of flags) counts.set(f.name, (counts.get(f.name) ?? 0) + 1);
    for (const [name, n] of counts) {
      if (n > 1) problems.push(`${where}: ${name} is given ${n} times (the last one wins)`);
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

// The invariant checks manifests.test.mjs runs on every render, in order.
export const CHECKS = [
  ["1. probes are gRPC health checks on the grpc port", checkProbes],
  ["2. grace period covers preStop + drain", checkGracePeriod],
  ["3. container ports match the binaries' listen flags", checkPorts],
  ["4. images are pinned", checkImages],
  ["5. cpu and memory requests and limits", checkResources],
  ["6. pod security and a writable /tmp", checkPodSecurity],
  ["7. Services select pods and target their ports", checkServices],
  ["8. router DNS discovery names headless Services", checkRouterDiscovery],
  ["9. PDBs and HPAs target workloads of the render", checkDisruptionAndScaling],
  ["9b. HPA-scaled workloads leave spec.replicas unset", checkHpaTargetsOmitReplicas],
  ["10. metrics annotations and PodMonitor ports", checkMetricsScraping],
  ["11. GPUs where the overlay says so, nowhere else", checkAccelerators],
  ["12. $(VAR) references resolve", checkEnvReferences],
  ["13. PrometheusRule groups equal tandem-rules.yml", checkPrometheusRuleGroups],
  ["14. args are flags the binaries accept", checkArgs],
  ["15. pods refer only to objects of the render", checkReferences],
];
