// Shared fixtures of the manifest_checks_*.test.mjs unit tests: the binaries' --help in the real
// format (wrapped defaults included), so the tests need no build and no kubectl; a small, correct
// render (good(): a router, a prefill and a decode Deployment with their Services, PDBs, HPA,
// PodMonitor, PrometheusRule) and its GPU variant (goodGpu()); accessors and editors of those
// objects; and assertCatches(), which checks that a check passes the correct render and reports
// a problem on a copy broken in one place. goodSecure() adds TLS, NetworkPolicies and API keys.

import assert from "node:assert/strict";

import { parseHelp } from "../manifest_checks.mjs";

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
  --api-key KEY[,KEY...]       HTTP /v1/* and gRPC Generate requests must send
                               "Authorization: Bearer KEY" (repeatable: any listed key works)
  --api-key-file PATH          more keys, one a line ('#' comments); re-read on SIGHUP
  --tls-cert PATH               serve TLS with this PEM certificate (chain) ...
  --tls-key PATH                ... and its PEM private key; both re-read when they change
  --tls-client-ca PATH          also require client certificates signed by this CA (mTLS)
Nodes:
  --prefill-dns NAME:PORT      prefill nodes: every address of NAME (a headless service)
  --decode-dns NAME:PORT       decode nodes: every address of NAME
  --dns-refresh-ms N           re-resolve the DNS names this often (default 5000)
  --node-tls-ca PATH            dial nodes over TLS, verifying them against this CA
  --node-tls-cert PATH          ... presenting this client certificate (mTLS) ...
  --node-tls-key PATH           ... and its key
  --node-tls-server-name NAME   the name node certificates carry (DNS SAN; nodes are dialled
                                by IP) (default tandem-node)
Placement:
  --mode disaggregated|colocated
                               disaggregated (default): decode node reserves, prefill node
                               prefills; colocated: the decode node does both
Requests:
  --lease-ms N                 lease on the decode node's reserved KV blocks (default 30000)
  --drain-timeout-ms N         on SIGINT/SIGTERM: time in-flight streams get to finish
                               (default 30000)
  --verbose                    debug logs (one line per placement)
  --help                       this text
`;

const nodeHelp = (name, grpc, metrics, extra) => `Usage: ${name} --model DIR [options]

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
${extra}  --backend cpu|cuda|sim        compute backend (default cpu; cuda needs a CUDA build and a GPU;
                                sim models a GPU's step times, see below)
  --kv-transport KIND           auto (default: ucx for --backend cpu, cuda for --backend cuda),
                                ucx, cuda or nccl (needs two GPUs)
  --kv-interface NAME[,NAME]    network interfaces UCX may use (UCX_NET_DEVICES)
  --kv-port-range LO-HI         TCP ports UCX's tcp transport listens on (default: any)
  --cluster-secret-file PATH    secret shared by every prefill and decode node (>= 32 bytes)
  --insecure-no-handoff-auth    run without the secret; experiments only
  --tls-cert PATH               serve TLS with this PEM certificate (chain) ...
  --tls-key PATH                ... and its PEM private key; both re-read when they change
  --tls-client-ca PATH          also require client certificates signed by this CA (mTLS)
  --threads N                   CPU threads (default: all cores)
  --no-prefix-caching           disable the prefix cache
  --help                        this text
`;

const PREFILL_FLAGS = `  --node-tls-ca PATH            dial nodes over TLS, verifying them against this CA
  --node-tls-cert PATH          ... presenting this client certificate (mTLS) ...
  --node-tls-key PATH           ... and its key
  --node-tls-server-name NAME   the name node certificates carry (DNS SAN; nodes are dialled
                                by IP) (default tandem-node)
`;

const DECODE_FLAGS = `  --lease-ms N                  default lease on reserved blocks (default 30000)
  --max-lease-ms N              longest lease a caller may ask for; longer ones are refused
                                (default 60000)
`;

export const HELPS = {
  "tandem-router": parseHelp(ROUTER_HELP),
  "tandem-prefill": parseHelp(nodeHelp("tandem-prefill", 50071, 9402, PREFILL_FLAGS)),
  "tandem-decode": parseHelp(nodeHelp("tandem-decode", 50061, 9401, DECODE_FLAGS)),
};

const RULE_GROUPS = [
  { name: "tandem.kv", rules: [{ record: "instance:kv:ratio", expr: "a / b" }] },
  { name: "tandem.alerts", rules: [{ alert: "Full", expr: "instance:kv:ratio > 0.9", for: "10m" }] },
];

export const CTX = { helps: HELPS, gpu: false, prometheusRuleGroups: RULE_GROUPS };

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
          securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 },
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
export function good() {
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
      args: ["--node-id=$(POD_NAME)", "--drain-timeout-ms=30000", ...CLUSTER_SECRET_ARGS],
    }),
    deployment("decode", {
      binary: "tandem-decode", grpc: 50061, metrics: 9401, grace: 45, replicas: null,
      // The default drain timeout (30 s): 10 + 30 < 45.
      args: ["--node-id=$(POD_NAME)", ...CLUSTER_SECRET_ARGS],
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
  for (const role of ["prefill", "decode"]) {
    const spec = podSpec(objects, role);
    spec.containers[0].volumeMounts.push(
      { name: "cluster-secret", mountPath: "/etc/tandem/cluster-secret", readOnly: true });
    spec.volumes.push(secretVolume("cluster-secret", "tandem-cluster-secret", ["secret"]));
  }
  return objects;
}

// How the base wires the cluster secret (and UCX's ports) into prefill and decode pods.
const CLUSTER_SECRET_ARGS = ["--cluster-secret-file=/etc/tandem/cluster-secret/secret",
                             "--kv-port-range=50100-50199"];
const secretVolume = (name, secretName, keys) => ({
  name,
  secret: { secretName, items: keys.map((key) => ({ key, path: key })), defaultMode: 0o400 },
});

// good() with what components/tls, network-policies and api-keys add: TLS on the router's APIs
// and mTLS on node ports (probes that work with TLS), NetworkPolicies, the API key file.
export function goodSecure() {
  const objects = good();
  const node = "/etc/tandem/tls/node";
  const router = container(objects, "router");
  router.args.push(`--tls-cert=/etc/tandem/tls/router/tls.crt`,
                   `--tls-key=/etc/tandem/tls/router/tls.key`,
                   `--node-tls-ca=${node}/ca.crt`, `--node-tls-cert=${node}/tls.crt`,
                   `--node-tls-key=${node}/tls.key`, "--node-tls-server-name=tandem-node",
                   "--api-key-file=/etc/tandem/api-keys/keys");
  router.volumeMounts.push(
    { name: "router-tls", mountPath: "/etc/tandem/tls/router", readOnly: true },
    { name: "node-tls", mountPath: node, readOnly: true },
    { name: "api-keys", mountPath: "/etc/tandem/api-keys", readOnly: true });
  podSpec(objects, "router").volumes.push(
    secretVolume("router-tls", "tandem-router-tls", ["tls.crt", "tls.key"]),
    secretVolume("node-tls", "tandem-node-tls", ["ca.crt", "tls.crt", "tls.key"]),
    secretVolume("api-keys", "tandem-api-keys", ["keys"]));
  for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    delete router[kind].grpc;
    router[kind].httpGet = { path: "/health", port: "http", scheme: "HTTPS" };
  }
  for (const role of ["prefill", "decode"]) {
    const c = container(objects, role);
    c.args.push(`--tls-cert=${node}/tls.crt`, `--tls-key=${node}/tls.key`,
                `--tls-client-ca=${node}/ca.crt`);
    if (role === "prefill") {
      c.args.push(`--node-tls-ca=${node}/ca.crt`, `--node-tls-cert=${node}/tls.crt`,
                  `--node-tls-key=${node}/tls.key`);
    }
    c.volumeMounts.push({ name: "node-tls", mountPath: node, readOnly: true });
    podSpec(objects, role).volumes.push(
      secretVolume("node-tls", "tandem-node-tls", ["ca.crt", "tls.crt", "tls.key"]));
    for (const kind of ["startupProbe", "readinessProbe"]) {
      delete c[kind].grpc;
      c[kind].tcpSocket = { port: "grpc" };
    }
    delete c.livenessProbe.grpc;
    c.livenessProbe.httpGet = { path: "/metrics", port: "metrics" };
  }
  objects.push(...networkPolicyFixtures());
  return objects;
}

// The NetworkPolicies of components/network-policies, in short.
function networkPolicyFixtures() {
  const pods = (role) => ({
    podSelector: { matchLabels: { "app.kubernetes.io/component": role } },
  });
  const prometheus = {
    namespaceSelector: {},
    podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } },
  };
  const ucx = [{ port: 50100, endPort: 50199, protocol: "TCP" }];
  const policy = (role, ingress, egress) => ({
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: `tandem-${role}` },
    spec: { ...pods(role), policyTypes: ["Ingress", "Egress"], ingress, egress },
  });
  return [
    policy("router", [
      { ports: [{ port: "http" }, { port: "grpc" }] },
      { from: [prometheus], ports: [{ port: "metrics" }] },
    ], [
      { to: [pods("prefill")], ports: [{ port: "grpc" }] },
      { to: [pods("decode")], ports: [{ port: "grpc" }] },
      {
        to: [{
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
          podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
        }],
        ports: [{ port: 53, protocol: "UDP" }, { port: 53, protocol: "TCP" }],
      },
    ]),
    policy("prefill", [
      { from: [pods("router")], ports: [{ port: "grpc" }] },
      { from: [pods("decode")], ports: structuredClone(ucx) },
      { from: [prometheus], ports: [{ port: "metrics" }] },
    ], [{ to: [pods("decode")], ports: structuredClone(ucx) }]),
    policy("decode", [
      { from: [pods("router")], ports: [{ port: "grpc" }] },
      { from: [pods("prefill")], ports: structuredClone(ucx) },
      { from: [prometheus], ports: [{ port: "metrics" }] },
    ], [{ to: [pods("prefill")], ports: structuredClone(ucx) }]),
  ];
}

// The GPU variant: prefill and decode on GPUs with --backend cuda.
export function goodGpu() {
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

// Accessors of good()'s objects: an object by kind and name, a role's container, its pod spec.
export const get = (objects, kind, name) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name);
export const container = (objects, role) =>
  get(objects, "Deployment", `tandem-${role}`).spec.template.spec.containers[0];
export const podSpec = (objects, role) =>
  get(objects, "Deployment", `tandem-${role}`).spec.template.spec;

// Replaces the container's `--flag=...` argument (which must be there) with `replacement`, or
// removes it when `replacement` is undefined.
export function replaceArg(objects, role, flag, replacement) {
  const args = container(objects, role).args;
  const i = args.findIndex((a) => a.startsWith(`${flag}=`));
  assert.ok(i >= 0, `${role} has ${flag}=`);
  if (replacement === undefined) args.splice(i, 1);
  else args[i] = replacement;
}

// Asserts `check` finds nothing wrong in good(), and, after `breakIt` mutates a fresh copy, a
// problem matching `pattern`.
export function assertCatches(check, breakIt, pattern, { ctx = CTX, base = good } = {}) {
  assert.deepEqual(check(base(), ctx), [], "the unbroken objects pass");
  const objects = base();
  breakIt(objects);
  const problems = check(objects, ctx);
  assert.ok(problems.some((p) => pattern.test(p)),
            `expected a problem matching ${pattern}, got ${JSON.stringify(problems, null, 1)}`);
}
