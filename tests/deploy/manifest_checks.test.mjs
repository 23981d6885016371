// Unit tests of manifest_checks.mjs: each check passes on a small, correct set of objects (a
// router, a prefill and a decode Deployment with their Services, PDBs, HPA, PodMonitor,
// PrometheusRule) and fails, with a message saying why, on a copy broken in one place. The
// binaries' --help is a fixture in the real format (wrapped defaults included), so these tests
// need no build and no kubectl.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  CHECKS,
  checkAccelerators,
  checkArgs,
  checkDisruptionAndScaling,
  checkEnvReferences,
  checkGracePeriod,
  checkHpaTargetsOmitReplicas,
  checkImages,
  checkMetricsScraping,
  checkPodSecurity,
  checkPorts,
  checkProbes,
  checkPrometheusRuleGroups,
  checkReferences,
  checkResources,
  checkRouterDiscovery,
  checkServices,
  effectiveFlag,
  expandVars,
  firstDifference,
  imageProblem,
  labelSelectorMatches,
  modelClass,
  parseHelp,
  parseHostPort,
  parseQuantity,
  preStopSleepSeconds,
  requirePackages,
  splitFlags,
  validateSchemas,
  varReferences,
} from "./manifest_checks.mjs";

await requirePackages();

// --help fixtures, in the binaries' format (flag lines indented 2, descriptions wrapping onto
// deeply indented lines, defaults split across lines).
const ROUTER_HELP = `Usage: tandem-router --model DIR (--decode ADDRS | --decode-dns NAME:PORT)
                     [--prefill ADDRS | --prefill-dns NAME:PORT] [options]

Model:
  --model DIR                  Hugging Face model directory
  --served-model-name NAME     the name requests give in \`model\` (default: DIR's base name)
Serving:
  --listen HOST:PORT           gRPC address (default 127.0.0.1:0; port 0 picks a free port)
  --http-listen HOST:PORT      OpenAI-compatible HTTP address (default 127.0.0.1:0; "" = off)
  --metrics-listen HOST:PORT   Prometheus /metrics address (default 127.0.0.1:0; "" = off)
Nodes:
  --prefill-dns NAME:PORT      prefill nodes: every address of NAME (a headless service)
  --decode-dns NAME:PORT       decode nodes: every address of NAME
  --dns-refresh-ms N           re-resolve the DNS names this often (default 5000)
Placement:
  --mode disaggregated|colocated
                               disaggregated (default): decode node reserves, prefill node
                               prefills; colocated: the decode node does both
Requests:
  --drain-timeout-ms N         on SIGINT/SIGTERM: time in-flight streams get to finish
                               (default 30000)
  --verbose                    debug logs (one line per placement)
  --help                       this text
`;

const nodeHelp = (name, grpc, metrics) => `Usage: ${name} --model DIR [options]

A node.

  --model DIR                   Hugging Face model directory
  --served-model-name NAME      model name reported to the router (default: the dir's name)
  --node-id NAME                name shown in log lines
  --listen HOST:PORT            gRPC address (default 0.0.0.0:${grpc}; port 0 = any free port)
  --metrics-listen HOST:PORT    Prometheus /metrics address (default 0.0.0.0:${metrics}; port 0 = any
                                free port; "" = no metrics endpoint)
  --drain-timeout-ms N          on SIGINT/SIGTERM: time in-flight requests get to finish before
                                they are cancelled; health turns NOT_SERVING at once (default
                                30000)
  --backend cpu|cuda|sim        compute backend (default cpu; cuda needs a CUDA build and a GPU;
                                sim models a GPU's step times, see below)
  --threads N                   CPU threads (default: all cores)
  --no-prefix-caching           disable the prefix cache
  --help                        this text
`;

const HELPS = {
  "tandem-router": parseHelp(ROUTER_HELP),
  "tandem-prefill": parseHelp(nodeHelp("tandem-prefill", 50071, 9402)),
  "tandem-decode": parseHelp(nodeHelp("tandem-decode", 50061, 9401)),
};

const RULE_GROUPS = [
  { name: "tandem.kv", rules: [{ record: "instance:kv:ratio", expr: "a / b" }] },
  { name: "tandem.alerts", rules: [{ alert: "Full", expr: "instance:kv:ratio > 0.9", for: "10m" }] },
];

const CTX = { helps: HELPS, gpu: false, prometheusRuleGroups: RULE_GROUPS };

// A tandem workload the way deploy/k8s/base writes them.
function deployment(role, { binary, grpc, metrics, http, args, grace, replicas = 2 }) {
  const labels = { "app.kubernetes.io/name": `tandem-${role}`, "app.kubernetes.io/component": role };
  const probe = (extra) => ({ grpc: { port: grpc }, periodSeconds: 5, ...extra });
  const ports = [{ name: "grpc", containerPort: grpc }, { name: "metrics", containerPort: metrics }];
  if (http) ports.unshift({ name: "http", containerPort: http });
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: `tandem-${role}`, labels: { ...labels } },
    spec: {
      ...(replicas === null ? {} : { replicas }),
      selector: { matchLabels: { ...labels } },
      template: {
        metadata: {
          labels: { ...labels },
          annotations: {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": String(metrics),
            "prometheus.io/path": "/metrics",
          },
        },
        spec: {
          serviceAccountName: "tandem",
          terminationGracePeriodSeconds: grace,
          securityContext: { runAsNonRoot: true, runAsUser: 10001 },
          containers: [{
            name: role,
            image: "localhost/tandem:0.7.0",
            command: [binary],
            args: ["--model=$(TANDEM_MODEL_DIR)", ...args],
            env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
            envFrom: [{ configMapRef: { name: "tandem-config-abc123" } }],
            ports,
            startupProbe: probe({ failureThreshold: 120 }),
            readinessProbe: probe(),
            livenessProbe: probe({ periodSeconds: 10 }),
            lifecycle: { preStop: { exec: { command: ["sleep", "10"] } } },
            resources: { requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "2", memory: "2Gi" } },
            securityContext: {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              capabilities: { drop: ["ALL"] },
            },
            volumeMounts: [
              { name: "model", mountPath: "/models", readOnly: true },
              { name: "tmp", mountPath: "/tmp" },
            ],
          }],
          volumes: [
            { name: "model", persistentVolumeClaim: { claimName: "tandem-model", readOnly: true } },
            { name: "tmp", emptyDir: { sizeLimit: "64Mi" } },
          ],
        },
      },
    },
  };
}

function service(role, ports, headless) {
  const selector = { "app.kubernetes.io/name": `tandem-${role}`, "app.kubernetes.io/component": role };
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: `tandem-${role}` },
    spec: {
      ...(headless ? { clusterIP: "None" } : {}),
      selector,
      ports: Object.entries(ports).map(([name, port]) => ({ name, port, targetPort: name })),
    },
  };
}

const pdb = (role) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: `tandem-${role}` },
  spec: { maxUnavailable: 1, selector: { matchLabels: { "app.kubernetes.io/component": role } } },
});

// A correct render. Each test breaks a fresh copy.
function good() {
  const objects = [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "tandem" } },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "tandem-config-abc123" },
      data: { TANDEM_MODEL_DIR: "/models", TANDEM_SERVED_MODEL_NAME: "tandem" },
    },
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "tandem-model" },
      spec: { accessModes: ["ReadOnlyMany"], resources: { requests: { storage: "10Gi" } } },
    },
    deployment("router", {
      binary: "tandem-router", grpc: 50051, metrics: 9400, http: 8000, grace: 150,
      args: ["--listen=0.0.0.0:50051", "--http-listen", "0.0.0.0:8000",
             "--metrics-listen=0.0.0.0:9400", "--prefill-dns=tandem-prefill:50071",
             "--decode-dns=tandem-decode:50061", "--drain-timeout-ms=120000"],
    }),
    deployment("prefill", {
      binary: "tandem-prefill", grpc: 50071, metrics: 9402, grace: 60,
      args: ["--node-id=$(POD_NAME)", "--drain-timeout-ms=30000"],
    }),
    deployment("decode", {
      binary: "tandem-decode", grpc: 50061, metrics: 9401, grace: 45, replicas: null,
      args: ["--node-id=$(POD_NAME)"],  // the default drain timeout (30 s): 10 + 30 < 45
    }),
    service("router", { http: 8000, grpc: 50051, metrics: 9400 }, false),
    service("prefill", { grpc: 50071, metrics: 9402 }, true),
    service("decode", { grpc: 50061, metrics: 9401 }, true),
    pdb("router"), pdb("prefill"), pdb("decode"),
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "tandem-decode" },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "tandem-decode" },
        minReplicas: 2,
        maxReplicas: 8,
      },
    },
    {
      apiVersion: "monitoring.coreos.com/v1",
      kind: "PodMonitor",
      metadata: { name: "tandem" },
      spec: {
        selector: { matchExpressions: [{ key: "app.kubernetes.io/component", operator: "Exists" }] },
        podMetricsEndpoints: [{ port: "metrics", path: "/metrics", interval: "15s" }],
      },
    },
    {
      apiVersion: "monitoring.coreos.com/v1",
      kind: "PrometheusRule",
      metadata: { name: "tandem" },
      spec: { groups: structuredClone(RULE_GROUPS) },
    },
  ];
  return objects;
}

// The GPU variant: prefill and decode on GPUs with --backend cuda.
function goodGpu() {
  const objects = good();
  for (const role of ["prefill", "decode"]) {
    const d = get(objects, "Deployment", `tandem-${role}`);
    d.spec.template.spec.nodeSelector = { "nvidia.com/gpu.present": "true" };
    const c = d.spec.template.spec.containers[0];
    c.args.push("--backend=cuda");
    c.resources.requests["nvidia.com/gpu"] = "1";
    c.resources.limits["nvidia.com/gpu"] = 1;
  }
  return objects;
}

const get = (objects, kind, name) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name);
const container = (objects, role) =>
  get(objects, "Deployment", `tandem-${role}`).spec.template.spec.containers[0];
const podSpec = (objects, role) => get(objects, "Deployment", `tandem-${role}`).spec.template.spec;
// Replaces the container's `--flag=...` argument (which must be there) with `replacement`, or
// removes it when `replacement` is undefined.
function replaceArg(objects, role, flag, replacement) {
  const args = container(objects, role).args;
  const i = args.findIndex((a) => a.startsWith(`${flag}=`));
  assert.ok(i >= 0, `${role} has ${flag}=`);
  if (replacement === undefined) args.splice(i, 1);
  else args[i] = replacement;
}

// Asserts `check` finds nothing wrong in good(), and, after `breakIt` mutates a fresh copy, a
// problem matching `pattern`.
function assertCatches(check, breakIt, pattern, { ctx = CTX, base = good } = {}) {
  assert.deepEqual(check(base(), ctx), [], "the unbroken objects pass");
  const objects = base();
  breakIt(objects);
  const problems = check(objects, ctx);
  assert.ok(problems.some((p) => pattern.test(p)),
            `expected a problem matching ${pattern}, got ${JSON.stringify(problems, null, 1)}`);
}

describe("the correct fixture", () => {
  it("passes every check and the schemas", async () => {
    for (const [title, check] of CHECKS) assert.deepEqual(check(good(), CTX), [], title);
    const gpuCtx = { ...CTX, gpu: true };
    for (const [title, check] of CHECKS) assert.deepEqual(check(goodGpu(), gpuCtx), [], title);
    assert.deepEqual(await validateSchemas(good()), []);
    assert.deepEqual(await validateSchemas(goodGpu()), []);
  });
});

describe("parseHelp", () => {
  it("reads flags, whether they take a value, and defaults that wrap across lines", () => {
    const router = HELPS["tandem-router"];
    assert.deepEqual(router.get("--listen"), { takesValue: true, default: "127.0.0.1:0" });
    assert.deepEqual(router.get("--drain-timeout-ms"), { takesValue: true, default: "30000" });
    assert.deepEqual(router.get("--verbose"), { takesValue: false, default: null });
    assert.deepEqual(router.get("--mode"), { takesValue: true, default: null });
    assert.deepEqual(router.get("--prefill-dns"), { takesValue: true, default: null });
    assert.equal(router.has("--decode"), false, "usage lines are not flag entries");
    const decode = HELPS["tandem-decode"];
    assert.equal(decode.get("--metrics-listen").default, "0.0.0.0:9401");
    assert.equal(decode.get("--drain-timeout-ms").default, "30000");
    assert.equal(decode.get("--backend").default, "cpu");
    assert.deepEqual(decode.get("--no-prefix-caching"), { takesValue: false, default: null });
  });
});

describe("helpers", () => {
  it("splitFlags follows the binaries' parser", () => {
    const help = HELPS["tandem-decode"];
    assert.deepEqual(splitFlags(["--listen", "0.0.0.0:1", "--threads=2", "--no-prefix-caching"], help),
                     { flags: [{ name: "--listen", value: "0.0.0.0:1" },
                               { name: "--threads", value: "2" },
                               { name: "--no-prefix-caching", value: undefined }],
                       problems: [] });
    assert.match(splitFlags(["--bogus=1"], help).problems[0], /unknown flag --bogus/);
    assert.match(splitFlags(["positional"], help).problems[0], /unexpected argument/);
    assert.match(splitFlags(["--threads"], help).problems[0], /needs a value/);
    assert.match(splitFlags(["--no-prefix-caching=1"], help).problems[0], /takes no value/);
  });

  it("effectiveFlag: the last given value, else the --help default", () => {
    const help = HELPS["tandem-decode"];
    const c = { command: ["tandem-decode"], args: ["--listen=0.0.0.0:1", "--listen", "0.0.0.0:2"] };
    assert.deepEqual(effectiveFlag(c, "--listen", help), { value: "0.0.0.0:2", source: "args" });
    assert.deepEqual(effectiveFlag(c, "--metrics-listen", help),
                     { value: "0.0.0.0:9401", source: "default" });
    assert.equal(effectiveFlag(c, "--http-listen", help), undefined);
  });

  it("parses host:port, quantities, preStop sleeps, label selectors", () => {
    assert.deepEqual(parseHostPort("0.0.0.0:50061"), { host: "0.0.0.0", port: 50061 });
    assert.deepEqual(parseHostPort("[::]:80"), { host: "[::]", port: 80 });
    assert.deepEqual(parseHostPort(":80"), { host: "", port: 80 });
    assert.equal(parseHostPort("50061"), null);
    assert.equal(parseQuantity("250m"), 0.25);
    assert.equal(parseQuantity("8Gi"), 8 * 2 ** 30);
    assert.equal(parseQuantity("16k"), 16000);
    assert.equal(parseQuantity(2), 2);
    assert.equal(parseQuantity("1e3"), 1000);
    assert.ok(Number.isNaN(parseQuantity("two")));
    const sleep = (command) => preStopSleepSeconds({ lifecycle: { preStop: { exec: { command } } } });
    assert.equal(sleep(["sleep", "10"]), 10);
    assert.equal(sleep(["/bin/sleep", "5s"]), 5);
    assert.equal(sleep(["sh", "-c", "sleep 7"]), 7);
    assert.equal(sleep(["curl", "x"]), null);
    assert.equal(preStopSleepSeconds({ lifecycle: { preStop: { sleep: { seconds: 3 } } } }), 3);
    assert.equal(preStopSleepSeconds({}), 0);
    const labels = { a: "1", b: "2" };
    assert.ok(labelSelectorMatches({ matchLabels: { a: "1" } }, labels));
    assert.ok(!labelSelectorMatches({ matchLabels: { a: "2" } }, labels));
    assert.ok(labelSelectorMatches({ matchExpressions: [{ key: "b", operator: "In", values: ["2"] }] },
                                   labels));
    assert.ok(!labelSelectorMatches({ matchExpressions: [{ key: "c", operator: "Exists" }] }, labels));
  });

  it("$(VAR) references and their expansion", () => {
    assert.deepEqual(varReferences("--model=$(DIR)/x --y=$$(NOT) $(B)"), ["DIR", "B"]);
    const env = new Map([["DIR", "/m"]]);
    assert.equal(expandVars("--model=$(DIR) $(NOPE) $$(DIR)", env), "--model=/m $(NOPE) $(DIR)");
  });

  it("imageProblem", () => {
    assert.equal(imageProblem("localhost/tandem:0.7.0"), null);
    assert.equal(imageProblem("registry:5000/tandem:1"), null);
    assert.equal(imageProblem(`tandem@sha256:${"a".repeat(64)}`), null);
    assert.match(imageProblem("registry:5000/tandem"), /no tag/);
    assert.match(imageProblem("tandem:latest"), /latest/);
    assert.match(imageProblem("tandem@sha256:abc"), /malformed digest/);
  });

  it("firstDifference names the path", () => {
    assert.equal(firstDifference({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }), null);
    assert.equal(firstDifference({ a: [1, { b: 2 }] }, { a: [1, { b: 3 }] }, "x"), "x.a[1].b: 2 vs 3");
    assert.equal(firstDifference([1], [1, 2], "g"), "g[1]: (absent) vs 2");
  });
});

describe("schema validation (kubernetes-models)", () => {
  it("maps apiVersion + kind to the model class, and nothing else", async () => {
    assert.equal((await modelClass("apps/v1", "Deployment")).kind, "Deployment");
    assert.equal((await modelClass("v1", "Service")).apiVersion, "v1");
    assert.equal((await modelClass("monitoring.coreos.com/v1", "PrometheusRule")).kind,
                 "PrometheusRule");
    assert.equal(await modelClass("apps/v1", "PodSpec"), null, "a type that is not a kind");
    assert.equal(await modelClass("apps/v9", "Deployment"), null);
    assert.equal(await modelClass("../../x", "Deployment"), null);
  });

  it("the model's validate() throws on an invalid object (how the package works)", async () => {
    const { Deployment } = await import("kubernetes-models/apps/v1");
    const d = good().find((o) => o.kind === "Deployment");
    new Deployment(d).validate();
    d.spec.replicas = "two";
    assert.throws(() => new Deployment(d).validate(), /replicas must be integer/);
  });

  it("reports a wrongly typed field", async () => {
    const objects = good();
    get(objects, "Deployment", "tandem-router").spec.replicas = "two";
    const problems = await validateSchemas(objects);
    assert.equal(problems.length, 1);
    assert.match(problems[0], /Deployment\/tandem-router: .*spec\/replicas must be integer/);
  });

  it("reports a missing required field", async () => {
    const objects = good();
    delete container(objects, "decode").name;
    assert.match((await validateSchemas(objects)).join("\n"),
                 /containers\/0 must have required property name/);
  });

  it("reports a field the schema does not have (a typo)", async () => {
    const objects = good();
    const c = container(objects, "prefill");
    c.readinesProbe = c.readinessProbe;
    get(objects, "Service", "tandem-router").spec.ports[0].targetport = "http";
    const problems = await validateSchemas(objects);
    assert.equal(problems.length, 2, problems.join("\n"));
    assert.match(problems[0],
                 /Deployment\/tandem-prefill: unknown field \/spec\/template\/spec\/containers\/0\/readinesProbe/);
    assert.match(problems[1], /Service\/tandem-router: unknown field \/spec\/ports\/0\/targetport/);
  });

  it("validates Prometheus Operator objects", async () => {
    const objects = good();
    get(objects, "PodMonitor", "tandem").spec.podMetricsEndpoints = "metrics";
    get(objects, "PrometheusRule", "tandem").spec.groups[0].rules[0].recrd = "x";
    const problems = await validateSchemas(objects);
    assert.match(problems.join("\n"), /PodMonitor\/tandem: .*podMetricsEndpoints must be array/);
    assert.match(problems.join("\n"), /PrometheusRule\/tandem: unknown field .*rules\/0\/recrd/);
  });

  it("fails an apiVersion/kind it has no model for", async () => {
    const objects = [{ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w" } },
                     { apiVersion: "apps/v1", kind: "Deploymnet", metadata: { name: "d" } }];
    const problems = await validateSchemas(objects);
    assert.equal(problems.length, 2);
    assert.match(problems[0], /no schema for apiVersion example.com\/v1 kind Widget/);
    assert.match(problems[1], /no schema for apiVersion apps\/v1 kind Deploymnet/);
  });
});

describe("1. probes", () => {
  it("fails a missing probe", () => {
    assertCatches(checkProbes,
      (o) => delete container(o, "decode").startupProbe,
      /container decode: no startupProbe/);
  });
  it("fails a probe on the wrong port", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "prefill").livenessProbe.grpc.port = 9402; },
      /livenessProbe checks port 9402, but the container's grpc port is 50071/);
  });
  it("fails a probe that is not the gRPC health check", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "router").readinessProbe = { httpGet: { path: "/ready", port: "http" } }; },
      /readinessProbe uses httpGet, not the gRPC health check/);
  });
  it("fails a container without a grpc port", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "router").ports[1].name = "rpc"; },
      /container router: no container port named grpc/);
  });
});

describe("2. grace period", () => {
  it("fails a grace period shorter than preStop + --drain-timeout-ms", () => {
    assertCatches(checkGracePeriod,
      (o) => { podSpec(o, "router").terminationGracePeriodSeconds = 120; },
      /terminationGracePeriodSeconds 120 must exceed .*10 s.*120000 \(args\) = 130 s/);
    assertCatches(checkGracePeriod,
      (o) => { podSpec(o, "router").terminationGracePeriodSeconds = 130; },
      /terminationGracePeriodSeconds 130 must exceed/);  // no margin at all: still too short
  });
  it("uses the binary's default drain timeout when the args set none", () => {
    assertCatches(checkGracePeriod,
      (o) => { podSpec(o, "decode").terminationGracePeriodSeconds = 40; },
      /terminationGracePeriodSeconds 40 .* 30000 \(default\)/);
  });
  it("uses Kubernetes' default grace period (30 s) when unset", () => {
    assertCatches(checkGracePeriod,
      (o) => { delete podSpec(o, "decode").terminationGracePeriodSeconds; },
      /terminationGracePeriodSeconds 30 must exceed/);
  });
  it("fails a preStop hook it cannot time", () => {
    assertCatches(checkGracePeriod,
      (o) => { container(o, "prefill").lifecycle.preStop = { httpGet: { path: "/x", port: 80 } }; },
      /cannot tell how long its preStop hook takes/);
  });
});

describe("3. ports", () => {
  it("fails a grpc containerPort that is not --listen", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "router").ports[1].containerPort = 50052; },
      /port grpc is 50052 but tandem-router listens on 50051 \(--listen 0.0.0.0:50051, args\)/);
  });
  it("fails a metrics containerPort that is not the binary's default", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").ports[1].containerPort = 9402; },
      /port metrics is 9402 but tandem-decode listens on 9401 .*default/);
  });
  it("reads the --flag value form", () => {
    assertCatches(checkPorts,
      (o) => {
        const args = container(o, "router").args;
        args[args.indexOf("--http-listen") + 1] = "0.0.0.0:8001";
      },
      /port http is 8000 but tandem-router listens on 8001 \(--http-listen 0.0.0.0:8001, args\)/);
  });
  it("fails a router left on its default listen address (port 0)", () => {
    assertCatches(checkPorts,
      (o) => replaceArg(o, "router", "--metrics-listen"),
      /--metrics-listen 127.0.0.1:0 \(default\) listens on port 0/);
  });
  it("fails port 0 given explicitly, and a loopback address", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "prefill").args.push("--listen=0.0.0.0:0"); },
      /--listen 0.0.0.0:0 \(args\) listens on port 0/);
    assertCatches(checkPorts,
      (o) => { container(o, "prefill").args.push("--listen=127.0.0.1:50071"); },
      /listens on loopback only/);
  });
  it("fails a listening port the container does not declare", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").ports.pop(); },
      /listens on port 9401 \(--metrics-listen, default\) but the container declares no port named metrics/);
  });
  it("fails an http port on a binary without --http-listen", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").ports.push({ name: "http", containerPort: 8000 }); },
      /port named http but tandem-decode has no --http-listen/);
  });
  it("fails a container that runs no known binary", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").command = ["tandem-decoder"]; },
      /runs tandem-decoder, not a tandem binary/);
    assertCatches(checkPorts,
      (o) => { delete container(o, "decode").command; },
      /no command/);
  });
});

describe("4. images", () => {
  it("fails :latest and untagged images", () => {
    assertCatches(checkImages,
      (o) => { container(o, "router").image = "localhost/tandem:latest"; },
      /container router: image localhost\/tandem:latest uses the latest tag/);
    assertCatches(checkImages,
      (o) => { container(o, "decode").image = "registry:5000/tandem"; },
      /container decode: image registry:5000\/tandem has no tag/);
  });
});

describe("5. resources", () => {
  it("fails a missing request or limit", () => {
    assertCatches(checkResources,
      (o) => { delete container(o, "router").resources.limits.memory; },
      /container router: no resources.limits.memory/);
    assertCatches(checkResources,
      (o) => { delete container(o, "decode").resources.requests; },
      /container decode: no resources.requests.cpu/);
  });
  it("fails requests above limits and unequal GPU requests and limits", () => {
    assertCatches(checkResources,
      (o) => { container(o, "router").resources.requests.cpu = "2500m"; },
      /requests cpu 2500m exceeds its limit 2/);
    assertCatches(checkResources,
      (o) => {
        container(o, "decode").resources.requests["nvidia.com/gpu"] = "1";
        container(o, "decode").resources.limits["nvidia.com/gpu"] = "2";
      },
      /extended resource nvidia.com\/gpu requests 1 but limits 2/);
  });
});

describe("6. pod security", () => {
  it("fails a pod that may run as root", () => {
    assertCatches(checkPodSecurity,
      (o) => { delete podSpec(o, "router").securityContext.runAsNonRoot; },
      /container router: runAsNonRoot is not true/);
  });
  it("fails privilege escalation and a writable root filesystem", () => {
    assertCatches(checkPodSecurity,
      (o) => { delete container(o, "decode").securityContext.allowPrivilegeEscalation; },
      /allowPrivilegeEscalation is not false/);
    assertCatches(checkPodSecurity,
      (o) => { container(o, "decode").securityContext.readOnlyRootFilesystem = false; },
      /readOnlyRootFilesystem is not true/);
  });
  it("fails a read-only root filesystem without a writable /tmp", () => {
    assertCatches(checkPodSecurity,
      (o) => {
        const c = container(o, "prefill");
        c.volumeMounts = c.volumeMounts.filter((m) => m.mountPath !== "/tmp");
      },
      /no volume mounted at \/tmp/);
    assertCatches(checkPodSecurity,
      (o) => { container(o, "prefill").volumeMounts[1].readOnly = true; },
      /\/tmp is mounted read-only/);
  });
});

describe("7. Services", () => {
  const svc = (o, role) => get(o, "Service", `tandem-${role}`).spec;
  it("fails a named targetPort no container declares", () => {
    assertCatches(checkServices,
      (o) => { svc(o, "router").ports[0].targetPort = "web"; },
      /Service\/tandem-router: port http targets "web", which no container of Deployment\/tandem-router/);
  });
  it("fails a numeric targetPort no container declares", () => {
    assertCatches(checkServices,
      (o) => { svc(o, "decode").ports[1].targetPort = 9400; },
      /port metrics targets 9400/);
  });
  it("fails a selector that matches no pods", () => {
    assertCatches(checkServices,
      (o) => { svc(o, "prefill").selector["app.kubernetes.io/component"] = "prefil"; },
      /Service\/tandem-prefill: selector .* matches no workload's pods/);
  });
  it("fails a prefill or decode Service that is not headless", () => {
    assertCatches(checkServices,
      (o) => { delete svc(o, "decode").clusterIP; },
      /Service\/tandem-decode: selects tandem-decode pods, so it must be headless/);
  });
});

describe("8. router discovery", () => {
  it("fails a --decode-dns naming a Service that is not in the render", () => {
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--decode-dns", "--decode-dns=decode:50061"),
      /--decode-dns names Service decode, which is not in the render/);
  });
  it("fails a --prefill-dns port that is not the prefill pods' grpc port", () => {
    const wrongPort = (o) =>
      replaceArg(o, "router", "--prefill-dns", "--prefill-dns=tandem-prefill:50061");
    assertCatches(checkRouterDiscovery, wrongPort,
                  /--prefill-dns port 50061 is not a port of Service tandem-prefill/);
    assertCatches(checkRouterDiscovery, wrongPort, /container prefill serves gRPC on 50071/);
  });
  it("fails a discovery Service that is not headless, or selects the wrong pods", () => {
    assertCatches(checkRouterDiscovery,
      (o) => { delete get(o, "Service", "tandem-decode").spec.clusterIP; },
      /--decode-dns names Service tandem-decode, which is not headless/);
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--decode-dns", "--decode-dns=tandem-prefill:50071"),
      /--decode-dns Service tandem-prefill selects no tandem-decode pods/);
  });
  it("needs no --prefill-dns in colocated mode", () => {
    const objects = good();
    replaceArg(objects, "router", "--prefill-dns", "--mode=colocated");
    assert.deepEqual(checkRouterDiscovery(objects, CTX), []);
  });
  it("fails a router without --decode-dns or (disaggregated) --prefill-dns", () => {
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--prefill-dns"),
      /no --prefill-dns/);
    assertCatches(checkRouterDiscovery,
      (o) => replaceArg(o, "router", "--decode-dns"),
      /no --decode-dns/);
  });
  it("fails a node preStop sleep shorter than the router's DNS refresh", () => {
    assertCatches(checkRouterDiscovery,
      (o) => { container(o, "router").args.push("--dns-refresh-ms=15000"); },
      /container decode: preStop sleep 10 s is shorter than the router's --dns-refresh-ms 15000/);
  });
});

describe("9. PDBs and HPAs", () => {
  const pdbSpec = (o, role) => get(o, "PodDisruptionBudget", `tandem-${role}`).spec;
  it("fails a PDB that selects nothing, or blocks every eviction", () => {
    assertCatches(checkDisruptionAndScaling,
      (o) => { pdbSpec(o, "router").selector.matchLabels["app.kubernetes.io/component"] = "gw"; },
      /PodDisruptionBudget\/tandem-router: selector matches no workload's pods/);
    assertCatches(checkDisruptionAndScaling,
      (o) => {
        delete pdbSpec(o, "prefill").maxUnavailable;
        pdbSpec(o, "prefill").minAvailable = 2;
      },
      /PodDisruptionBudget\/tandem-prefill: allows no voluntary eviction/);
  });
  it("fails an HPA whose target is not in the render", () => {
    assertCatches(checkDisruptionAndScaling,
      (o) => { get(o, "HorizontalPodAutoscaler", "tandem-decode").spec.scaleTargetRef.name = "d"; },
      /scaleTargetRef apps\/v1 Deployment\/d is not in the render/);
  });
  it("fails a Deployment whose selector misses its own pods", () => {
    assertCatches(checkDisruptionAndScaling,
      (o) => { get(o, "Deployment", "tandem-router").spec.selector.matchLabels.extra = "x"; },
      /Deployment\/tandem-router: spec.selector does not select its own pod template/);
  });
  it("9b: fails an HPA-scaled Deployment that sets spec.replicas", () => {
    assertCatches(checkHpaTargetsOmitReplicas,
      (o) => { get(o, "Deployment", "tandem-decode").spec.replicas = 2; },
      /Deployment\/tandem-decode: sets spec.replicas 2 but HorizontalPodAutoscaler\/tandem-decode/);
  });
});

describe("10. metrics", () => {
  it("fails a prometheus.io/port that is not the metrics port", () => {
    assertCatches(checkMetricsScraping,
      (o) => {
        const template = get(o, "Deployment", "tandem-prefill").spec.template;
        template.metadata.annotations["prometheus.io/port"] = "9401";
      },
      /Deployment\/tandem-prefill: prometheus.io\/port 9401, but its metrics containerPort is 9402/);
  });
  it("fails a PodMonitor endpoint naming a port the pods lack", () => {
    assertCatches(checkMetricsScraping,
      (o) => { get(o, "PodMonitor", "tandem").spec.podMetricsEndpoints[0].port = "prometheus"; },
      /PodMonitor\/tandem: endpoint port "prometheus" is not a port of Deployment\/tandem-router/);
  });
  it("fails a PodMonitor that selects nothing", () => {
    assertCatches(checkMetricsScraping,
      (o) => { get(o, "PodMonitor", "tandem").spec.selector = { matchLabels: { app: "tandem" } }; },
      /PodMonitor\/tandem: selector matches no workload's pods/);
  });
});

describe("11. accelerators", () => {
  const gpu = { ctx: { ...CTX, gpu: true }, base: goodGpu };
  it("fails a GPU overlay whose decode pods ask for no GPU", () => {
    assertCatches(checkAccelerators,
      (o) => { delete container(o, "decode").resources.limits["nvidia.com/gpu"]; },
      /container decode: no resources.limits\["nvidia.com\/gpu"\]/, gpu);
  });
  it("fails a GPU overlay without a nodeSelector or --backend cuda", () => {
    assertCatches(checkAccelerators,
      (o) => { delete podSpec(o, "prefill").nodeSelector; },
      /Deployment\/tandem-prefill: no nodeSelector/, gpu);
    assertCatches(checkAccelerators,
      (o) => { container(o, "prefill").args.pop(); },
      /container prefill: --backend is cpu, not cuda/, gpu);
  });
  it("fails nvidia.com/gpu anywhere in a render without GPUs", () => {
    assertCatches(checkAccelerators,
      (o) => { podSpec(o, "router").tolerations = [{ key: "nvidia.com/gpu", operator: "Exists" }]; },
      /Deployment\/tandem-router: mentions nvidia.com\/gpu in a render without GPUs/);
  });
  it("fails a cpu overlay whose model is not the built-in one", () => {
    const ctx = { ...CTX, builtinModelDir: "/usr/share/tandem/models/demo-llama3" };
    const config = (o) => get(o, "ConfigMap", "tandem-config-abc123").data;
    const builtin = () => {
      const o = good();
      config(o).TANDEM_MODEL_DIR = ctx.builtinModelDir;
      return o;
    };
    assertCatches(checkAccelerators,
      (o) => { config(o).TANDEM_MODEL_DIR = "/models"; },
      /ConfigMap\/tandem-config-abc123: TANDEM_MODEL_DIR is \/models, not the image's built-in/,
      { ctx, base: builtin });
  });
});

describe("12. $(VAR) references", () => {
  it("fails a reference to an undefined variable", () => {
    assertCatches(checkEnvReferences,
      (o) => { container(o, "decode").args.push("--served-model-name=$(MODEL_NAME)"); },
      /container decode: '--served-model-name=\$\(MODEL_NAME\)' refers to \$\(MODEL_NAME\)/);
  });
  it("fails an envFrom ConfigMap that is not in the render (so its keys are unknown)", () => {
    assertCatches(checkEnvReferences,
      (o) => { container(o, "prefill").envFrom[0].configMapRef.name = "tandem-config"; },
      /envFrom names ConfigMap tandem-config, which is not in the render/);
  });
});

describe("13. PrometheusRule", () => {
  it("fails groups that differ from tandem-rules.yml", () => {
    assertCatches(checkPrometheusRuleGroups,
      (o) => { get(o, "PrometheusRule", "tandem").spec.groups[1].rules[0].for = "5m"; },
      /PrometheusRule\/tandem: differs .* at spec.groups\[1\].rules\[0\].for: "5m" vs "10m"/);
  });
});

describe("14. args", () => {
  it("fails an unknown flag, a switch with a value, a flag given twice", () => {
    assertCatches(checkArgs,
      (o) => { container(o, "decode").args.push("--max-batch=8"); },
      /container decode: unknown flag --max-batch/);
    assertCatches(checkArgs,
      (o) => { container(o, "decode").args.push("--no-prefix-caching=true"); },
      /--no-prefix-caching is a switch and takes no value/);
    assertCatches(checkArgs,
      (o) => { container(o, "prefill").args.push("--drain-timeout-ms=5000"); },
      /container prefill: --drain-timeout-ms is given 2 times/);
  });
});

describe("15. references", () => {
  it("fails a PVC, volume or ServiceAccount that is not in the render", () => {
    assertCatches(checkReferences,
      (o) => { o.splice(o.indexOf(get(o, "PersistentVolumeClaim", "tandem-model")), 1); },
      /volume model claims PersistentVolumeClaim tandem-model, not in the render/);
    assertCatches(checkReferences,
      (o) => { container(o, "router").volumeMounts[1].name = "scratch"; },
      /container router: mounts volume scratch, which the pod does not define/);
    assertCatches(checkReferences,
      (o) => { podSpec(o, "decode").serviceAccountName = "tandem-decode"; },
      /serviceAccountName tandem-decode is not in the render/);
  });
});
