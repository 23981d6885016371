// tandem's Kubernetes manifests, as `kubectl kustomize` renders them: base alone, every overlay in
// deploy/k8s/overlays (found by listing the folder, so a new overlay is checked too), and base plus
// each component of deploy/k8s/components (through a temporary kustomization). Every rendered
// object is validated against its OpenAPI schema, and every render must keep the invariants of
// manifest_checks.mjs, checked against the real binaries' --help (ports, drain timeouts, flags).
// The binaries also parse each container's args themselves (`BINARY ARGS... --help`).
//
// Environment: TANDEM_BIN_DIR (the built tandem-router, tandem-prefill, tandem-decode; required),
// TANDEM_SOURCE_DIR (the repository; default: two folders up), KUBECTL (default:
// tests/deploy/.tools/kubectl if present, else kubectl on PATH).
// Run by CTest as tandem_deploy_manifests_test (tests/deploy/CMakeLists.txt), or:
//   TANDEM_BIN_DIR=build/bin node --test tests/deploy/*.test.mjs

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import {
  CHECKS,
  INSTALL_HINT,
  OPERATOR_SECRETS,
  argsOf,
  binaryOf,
  checkCertManagerExample,
  checkPrometheusRuleGroups,
  containerEnv,
  expandVars,
  parseHelp,
  requirePackages,
  splitFlags,
  validateSchemas,
  workloads,
} from "./manifest_checks.mjs";

await requirePackages();
const YAML = await import("yaml");

const SOURCE_DIR = path.resolve(
  process.env.TANDEM_SOURCE_DIR ?? path.join(path.dirname(fileURLToPath(import.meta.url)), "../.."),
);
const BIN_DIR = process.env.TANDEM_BIN_DIR;
// scripts/install-deps.sh puts a kubectl with kustomize v5 in tests/deploy/.tools when the
// machine has none (Debian 12's own is too old).
const LOCAL_KUBECTL = path.join(import.meta.dirname, ".tools", "kubectl");
const KUBECTL = process.env.KUBECTL ?? (fs.existsSync(LOCAL_KUBECTL) ? LOCAL_KUBECTL : "kubectl");
const K8S_DIR = path.join(SOURCE_DIR, "deploy/k8s");
const BINARIES = ["tandem-router", "tandem-prefill", "tandem-decode"];
// The model the cpu overlay serves, built into the image (deploy/image).
const BUILTIN_MODEL_DIR = "/usr/share/tandem/models/demo-llama3";

if (!BIN_DIR) {
  throw new Error("TANDEM_BIN_DIR is not set: point it at the build's bin/ (ctest sets it)");
}

// Kubernetes reads YAML as 1.1 (sigs.k8s.io/yaml), where e.g. an unquoted `on` is a boolean.
const YAML_OPTIONS = { version: "1.1" };

function parseDocuments(text, what) {
  const objects = [];
  for (const doc of YAML.parseAllDocuments(text, YAML_OPTIONS)) {
    if (doc.errors.length) throw new Error(`${what}: ${doc.errors.map((e) => e.message).join("; ")}`);
    const obj = doc.toJS();
    if (obj !== null && obj !== undefined) objects.push(obj);
  }
  return objects;
}

function kubectlKustomize(dir) {
  try {
    return execFileSync(KUBECTL, ["kustomize", dir], {
      encoding: "utf8",
      maxBuffer: 64 << 20,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    if (e.code === "ENOENT") throw new Error(`${KUBECTL} not found (needs kustomize): ${INSTALL_HINT}`);
    throw new Error(`${KUBECTL} kustomize ${dir} failed: ${e.stderr || e.message}`);
  }
}

// kubectl's built-in kustomize, "v5.5.0"; throws when kubectl is missing or too old to render
// deploy/k8s (components, `labels`, `patches` with targets need kustomize v5: kubectl >= 1.27;
// Debian 12's kubernetes-client is kubectl 1.20 with kustomize v2).
function kustomizeVersion() {
  let info;
  try {
    info = JSON.parse(execFileSync(KUBECTL, ["version", "--client", "-o", "json"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }));
  } catch (e) {
    if (e.code === "ENOENT") throw new Error(`${KUBECTL} not found (needs kustomize): ${INSTALL_HINT}`);
    throw new Error(`${KUBECTL} version failed: ${e.stderr || e.message}`);
  }
  const version = info.kustomizeVersion ?? "none";
  if (!/^v([5-9]|\d{2,})\./.test(version)) {
    throw new Error(`${KUBECTL} ${info.clientVersion?.gitVersion} has kustomize ${version}; ` +
                    `deploy/k8s needs kustomize v5 (kubectl >= 1.27)`);
  }
  return version;
}

const hasKustomization = (dir) =>
  ["kustomization.yaml", "kustomization.yml", "Kustomization"].some((f) =>
    fs.existsSync(path.join(dir, f)));

const subdirs = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && hasKustomization(path.join(dir, d.name)))
    .map((d) => d.name)
    .sort();

// What to render: base, each overlay, base + each component.
const overlays = subdirs(path.join(K8S_DIR, "overlays"));
const components = subdirs(path.join(K8S_DIR, "components"));
const TARGETS = [
  { name: "base", dir: path.join(K8S_DIR, "base") },
  ...overlays.map((o) => ({ name: o, dir: path.join(K8S_DIR, "overlays", o) })),
  ...components.map((c) => ({ name: `base+${c}`, component: c })),
];

const tempDirs = [];
after(() => {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});

function render(target) {
  let dir = target.dir;
  if (target.component) {
    // kustomize wants relative paths: the temporary kustomization points back into the repo.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "tandem-deploy-test-"));
    tempDirs.push(dir);
    const rel = (p) => path.relative(dir, p);
    fs.writeFileSync(path.join(dir, "kustomization.yaml"), YAML.stringify({
      apiVersion: "kustomize.config.k8s.io/v1beta1",
      kind: "Kustomization",
      resources: [rel(path.join(K8S_DIR, "base"))],
      components: [rel(path.join(K8S_DIR, "components", target.component))],
    }));
  }
  return parseDocuments(kubectlKustomize(dir), `kubectl kustomize ${target.name}`);
}

function assertNoProblems(problems) {
  if (problems.length) {
    assert.fail(`${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
  }
}

// The binaries' --help, parsed once.
const helps = {};
const helpTexts = {};
for (const binary of BINARIES) {
  const file = path.join(BIN_DIR, binary);
  if (!fs.existsSync(file)) {
    throw new Error(`${file} not found: build it first (ninja ${BINARIES.join(" ")})`);
  }
  helpTexts[binary] = execFileSync(file, ["--help"], { encoding: "utf8", timeout: 10_000 });
  helps[binary] = parseHelp(helpTexts[binary]);
}

const rulesFile = path.join(SOURCE_DIR, "deploy/prometheus/tandem-rules.yml");
const prometheusRuleGroups = YAML.parse(fs.readFileSync(rulesFile, "utf8"), YAML_OPTIONS).groups;

describe("the binaries' --help", () => {
  for (const binary of BINARIES) {
    it(`${binary}: listen flags and the drain timeout have defaults`, () => {
      const help = helps[binary];
      for (const flag of ["--listen", "--metrics-listen"]) {
        assert.ok(help.get(flag)?.takesValue, `${binary} --help lists ${flag} HOST:PORT`);
        assert.match(help.get(flag).default ?? "", /^\S*:\d+$/, `${binary} ${flag} default`);
      }
      assert.match(help.get("--drain-timeout-ms")?.default ?? "", /^\d+$/,
                   `${binary} --drain-timeout-ms default`);
      assert.equal(help.get("--help")?.takesValue, false);
    });
  }
});

describe("deploy/prometheus", () => {
  it("components/prometheus-operator/prometheusrule.yaml has tandem-rules.yml's groups", () => {
    const file = path.join(K8S_DIR, "components/prometheus-operator/prometheusrule.yaml");
    const objects = parseDocuments(fs.readFileSync(file, "utf8"), file);
    assert.equal(objects.filter((o) => o.kind === "PrometheusRule").length, 1);
    assert.ok(prometheusRuleGroups?.length > 0, `${rulesFile} has groups`);
    assertNoProblems(checkPrometheusRuleGroups(objects, { prometheusRuleGroups }));
  });
});

describe("deploy/README.md", () => {
  // The Secrets the manifests may mount without containing them (OPERATOR_SECRETS, check 15) are
  // the ones the guide tells the operator to create, each with its keys.
  const guide = fs.readFileSync(path.join(SOURCE_DIR, "deploy/README.md"), "utf8");
  for (const [name, { keys }] of OPERATOR_SECRETS) {
    it(`tells the operator how to create Secret ${name}`, () => {
      assert.ok(guide.includes("## Secrets the operator creates"), "the guide has the section");
      assert.match(guide, new RegExp(`kubectl create secret [^\\n]*\\b${name}\\b`),
                   `a kubectl create secret command for ${name}`);
      const section = guide.slice(guide.indexOf("## Secrets the operator creates"));
      const row = section.split("\n").find((l) => l.startsWith(`| \`${name}\``));
      assert.ok(row, `the table of operator Secrets has a row for ${name}`);
      for (const key of keys) assert.ok(row.includes(`\`${key}\``), `${name}'s row names key ${key}`);
    });
  }
});

describe("components/tls/cert-manager.example.yaml", () => {
  it("issues every Secret the tls component mounts, with the names and usages the pods need",
     () => {
       const file = path.join(K8S_DIR, "components/tls/cert-manager.example.yaml");
       const example = parseDocuments(fs.readFileSync(file, "utf8"), file);
       const objects = render({ name: "base+tls", component: "tls" });
       assertNoProblems(checkCertManagerExample(example, objects, { helps }));
     });
});

it("kubectl has kustomize v5", (t) => {
  t.diagnostic(`${KUBECTL}: kustomize ${kustomizeVersion()}`);
});

it("deploy/k8s has overlays and components to render", () => {
  assert.ok(overlays.length > 0, "no overlay in deploy/k8s/overlays");
  assert.ok(components.includes("model-hostpath"), "components/model-hostpath is rendered");
});

for (const target of TARGETS) {
  describe(`render ${target.name}`, () => {
    let objects = [];
    const ctx = {
      helps,
      gpu: target.name.includes("gpu"),
      builtinModelDir: target.name === "cpu" ? BUILTIN_MODEL_DIR : undefined,
      prometheusRuleGroups,
    };

    before(() => {
      objects = render(target);
    });

    it("renders the three tandem Deployments", (t) => {
      const kinds = new Map();
      for (const o of objects) kinds.set(o.kind, (kinds.get(o.kind) ?? 0) + 1);
      const summary = [...kinds].sort().map(([k, n]) => `${k} ${n}`).join(", ");
      t.diagnostic(`${target.name}: ${objects.length} objects (${summary})`);
      // Otherwise the container checks would pass on nothing. (Containers running anything
      // else fail check 3.)
      const binaries = new Set(workloads(objects).flatMap((w) =>
        (w.pod.spec?.containers ?? []).map(binaryOf)));
      for (const binary of BINARIES) assert.ok(binaries.has(binary), `a container runs ${binary}`);
    });

    it("every object validates against its schema", async () => {
      assertNoProblems(await validateSchemas(objects));
    });

    for (const [title, check] of CHECKS) {
      it(title, () => {
        assertNoProblems(check(objects, ctx));
      });
    }

    it("the binaries accept each container's args", () => {
      const problems = [];
      for (const w of workloads(objects)) {
        for (const c of w.pod.spec?.containers ?? []) {
          const binary = binaryOf(c);
          if (!helps[binary]) continue;  // reported by check 3
          const where = `${w.ref} container ${c.name}`;
          const { env } = containerEnv(c, objects);
          const args = argsOf(c).map((a) => expandVars(a, env));
          // Never start a server: a valued flag missing its value would swallow the --help.
          if (splitFlags(args, helps[binary]).problems.length) continue;  // reported by check 14
          try {
            const out = execFileSync(path.join(BIN_DIR, binary), [...args, "--help"], {
              encoding: "utf8",
              timeout: 10_000,
              stdio: ["ignore", "pipe", "pipe"],
            });
            if (!out.startsWith("Usage:")) problems.push(`${where}: ${binary} printed no usage`);
          } catch (e) {
            problems.push(`${where}: ${binary} ${args.join(" ")} refused its args: ` +
                          `${(e.stderr || e.message).trim()}`);
          }
        }
      }
      assertNoProblems(problems);
    });
  });
}
