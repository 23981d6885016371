// The invariant checks of secrets and TLS: 16. every prefill and decode node reads the same
// cluster secret (the HMAC key of KV handoffs) and nothing runs without handoff authentication;
// 17. every file a tandem flag names (cluster secret, keys, certificates, API keys) comes from a
// volume the container mounts read-only, key material from a Secret with a mode no other user can
// read, mounted so that the kubelet's updates reach it, and no API key is written in the args;
// 18. TLS is all or nothing inside the cluster: every node serves mTLS or none does, and the
// router (and prefill, for --kv-transport nccl) dials nodes the way they listen.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { argsOf, binaryOf, effectiveFlag, givenFlag, splitFlags } from "./flags.mjs";
import { NODE_BINARIES, containersOf, eachContainer, workloads } from "./objects.mjs";
import { FILE_FLAGS, fileSource, findSecret, keysOf, octal } from "./secrets.mjs";

// 16. Handoffs are authenticated everywhere: no container runs --insecure-no-handoff-auth; every
// prefill container has --cluster-secret-file (tandem-prefill refuses to start without it); with
// prefill pods in the render every decode container has it too (a decode node without it refuses
// Reserve, so every disaggregated request would fail); all of them read the same Secret key
// (handoffs signed with one secret do not verify with another); and no other pod (the router)
// mounts that Secret: the router carries handoffs and must not be able to forge them.
export function checkClusterSecret(objects, ctx = {}) {
  const problems = [];
  const nodes = eachContainer(objects).filter(({ c }) => NODE_BINARIES.has(binaryOf(c)));
  const hasPrefill = nodes.some(({ c }) => binaryOf(c) === "tandem-prefill");
  const sources = new Map();  // "Secret/name key k" -> [where]
  for (const { w, c, where } of eachContainer(objects)) {
    const help = ctx.helps?.[binaryOf(c)];
    if (givenFlag(c, "--insecure-no-handoff-auth", help) !== undefined) {
      problems.push(`${where}: --insecure-no-handoff-auth: anyone who reaches a node's gRPC port ` +
                    `could direct where KV is written; give --cluster-secret-file instead`);
    }
    const binary = binaryOf(c);
    if (!NODE_BINARIES.has(binary)) continue;
    const file = givenFlag(c, "--cluster-secret-file", help);
    if (file === undefined || file === "") {
      if (binary === "tandem-prefill") {
        problems.push(`${where}: no --cluster-secret-file: tandem-prefill refuses to start without ` +
                      `the cluster secret`);
      } else if (hasPrefill) {
        problems.push(`${where}: no --cluster-secret-file: the decode node would refuse every ` +
                      `Reserve, so no prefill pod could hand it a request`);
      }
      continue;
    }
    const src = fileSource(w.pod, c, file);
    if (src?.kind !== "Secret" || !src.name) continue;  // check 17 says what is wrong
    const key = `Secret ${src.name} key ${src.key}`;
    if (!sources.has(key)) sources.set(key, []);
    sources.get(key).push(where);
  }
  if (sources.size > 1) {
    problems.push(`prefill and decode nodes must share one cluster secret, but they read ` +
                  [...sources].map(([k, ws]) => `${k} (${ws.join(", ")})`).join(" and "));
  }
  const secretNames = new Set([...sources.keys()].map((k) => k.split(" ")[1]));
  for (const w of workloads(objects)) {
    if (containersOf(w.pod).some((c) => NODE_BINARIES.has(binaryOf(c)))) continue;
    for (const v of w.pod.spec?.volumes ?? []) {
      const names = [v.secret?.secretName,
                     ...(v.projected?.sources ?? []).map((x) => x.secret?.name)].filter(Boolean);
      for (const name of names.filter((n) => secretNames.has(n))) {
        problems.push(`${w.ref}: volume ${v.name} holds the cluster secret (Secret ${name}); only ` +
                      `prefill and decode pods may: whoever has it can forge KV handoffs`);
      }
    }
  }
  return problems;
}

// Key material must not be readable by other users of the node, nor writable: no bits for
// others, no write or execute for the group, no execute for the owner (0400 or 0440).
const LOOSE_MODE_BITS = 0o137;

// 17. Every file a tandem flag names (FILE_FLAGS) lies in a volume the container mounts
// read-only; key material (the cluster secret, private keys, API keys) comes from a Secret,
// certificates from a Secret or a ConfigMap; the Secret's file mode lets no other user read it
// (and with mode 0400, which the kubelet makes 0440 for the pod's fsGroup, the pod must have an
// fsGroup, or its non-root user cannot read the root-owned file); the mount has no subPath (the
// kubelet never updates subPath mounts, so a rotated certificate or key would never reach the
// process); the file is a key the Secret has. And no API key is written in the args: a literal
// --api-key is committed with the manifests (use --api-key-file, or $(VAR) from a Secret).
export function checkSecretFiles(objects, ctx = {}) {
  const problems = [];
  for (const { w, c, where } of eachContainer(objects)) {
    const help = ctx.helps?.[binaryOf(c)];
    const podSc = w.pod.spec?.securityContext ?? {};
    const runAsUser = c.securityContext?.runAsUser ?? podSc.runAsUser;
    for (const [flag, { secret }] of FILE_FLAGS) {
      const file = givenFlag(c, flag, help);
      if (file === undefined || file === "") continue;
      const src = fileSource(w.pod, c, file);
      if (!src) {
        problems.push(`${where}: ${flag} ${file} is in no volume the container mounts (the image ` +
                      `has no such file)`);
        continue;
      }
      const vol = `volume ${src.mount.name}`;
      if (src.mount.readOnly !== true) {
        problems.push(`${where}: ${flag} ${file}: ${vol} is mounted writable; mount it readOnly`);
      }
      if (src.mount.subPath || src.mount.subPathExpr) {
        problems.push(`${where}: ${flag} ${file}: ${vol} is mounted with subPath, which the kubelet ` +
                      `never updates: a rotated Secret would not reach the process`);
      }
      if (!src.volume) continue;  // check 15 reports the missing volume
      if (secret && src.kind !== "Secret") {
        problems.push(`${where}: ${flag} ${file} comes from ${vol} (${src.kind ?? "unknown"}), ` +
                      `not from a Secret`);
        continue;
      }
      if (src.kind !== "Secret" && src.kind !== "ConfigMap") {
        problems.push(`${where}: ${flag} ${file} comes from ${vol} (${src.kind}), not from a ` +
                      `Secret or ConfigMap`);
        continue;
      }
      if (src.key === undefined || src.key === "") {
        problems.push(`${where}: ${flag} ${file}: ${vol} (${src.kind} ${src.name}) puts no file ` +
                      `there (its items do not list that path)`);
        continue;
      }
      if (src.kind === "Secret") {
        const mode = src.mode ?? 0o644;
        if (mode & LOOSE_MODE_BITS) {
          problems.push(`${where}: ${flag} ${file}: ${vol} gives it mode ${octal(mode)}` +
                        `${src.mode === undefined ? " (the default)" : ""}; key material wants ` +
                        `0400 (no access for other users of the node)`);
        } else if (!(mode & 0o004) && runAsUser !== 0 && podSc.fsGroup === undefined) {
          problems.push(`${where}: ${flag} ${file}: mode ${octal(mode)} on a root-owned file, and ` +
                        `the pod sets no fsGroup: uid ${runAsUser ?? "(image default)"} cannot ` +
                        `read it`);
        }
        const obj = findSecret(objects, src.name);
        if (obj && !keysOf(obj).includes(src.key)) {
          problems.push(`${where}: ${flag} ${file} is key ${src.key} of Secret ${src.name}, which ` +
                        `has ${obj.operator ? "(as the deploy guide creates it) " : ""}keys ` +
                        `${keysOf(obj).join(", ")}`);
        }
      }
    }
    const { flags } = splitFlags(argsOf(c), help);
    for (const f of flags.filter((x) => x.name === "--api-key")) {
      const value = f.value ?? "";
      const vars = [...value.matchAll(/\$\(([^)]*)\)/g)].map((m) => m[1]);
      const fromSecret = (name) => (c.env ?? []).some((e) => e.name === name &&
                                                        e.valueFrom?.secretKeyRef) ||
        (c.envFrom ?? []).some((e) => e.secretRef);
      if (vars.length === 0 || value.replace(/\$\([^)]*\)/g, "").replace(/,/g, "") !== "") {
        problems.push(`${where}: --api-key with a literal key in the args (committed with the ` +
                      `manifests); use --api-key-file from a Secret (components/api-keys)`);
      } else if (!vars.every(fromSecret)) {
        problems.push(`${where}: --api-key=${value} takes a key from an env var that no Secret ` +
                      `sets`);
      }
    }
  }
  return problems;
}

const SERVER_TLS = ["--tls-cert", "--tls-key", "--tls-client-ca"];
const CLIENT_TLS = ["--node-tls-ca", "--node-tls-cert", "--node-tls-key"];

// 18. TLS inside the cluster is all or nothing. --tls-cert and --tls-key come together (and
// --tls-client-ca only with them), so do --node-tls-cert and --node-tls-key (with --node-tls-ca).
// When any prefill or decode node serves TLS, every one serves mTLS (--tls-cert, --tls-key,
// --tls-client-ca: "mTLS on every node port"), and the router dials them with --node-tls-ca and a
// client certificate (the nodes require one); a prefill node on --kv-transport nccl dials decode
// nodes the same way. When no node serves TLS, nothing dials them with TLS (every call would fail).
export function checkTls(objects, ctx) {
  const problems = [];
  const all = eachContainer(objects).filter(({ c }) => ctx.helps[binaryOf(c)]);
  const has = (c, flag) => {
    const v = givenFlag(c, flag, ctx.helps[binaryOf(c)]);
    return v !== undefined && v !== "";
  };
  for (const { c, where } of all) {
    if (has(c, "--tls-cert") !== has(c, "--tls-key")) {
      problems.push(`${where}: --tls-cert and --tls-key go together`);
    }
    if (has(c, "--tls-client-ca") && !has(c, "--tls-cert")) {
      problems.push(`${where}: --tls-client-ca without --tls-cert (mTLS needs TLS)`);
    }
    if (has(c, "--node-tls-cert") !== has(c, "--node-tls-key")) {
      problems.push(`${where}: --node-tls-cert and --node-tls-key go together`);
    }
    if ((has(c, "--node-tls-cert") || has(c, "--node-tls-server-name")) && !has(c, "--node-tls-ca")) {
      problems.push(`${where}: --node-tls-cert/--node-tls-server-name without --node-tls-ca (the ` +
                    `node's certificate would not be verified)`);
    }
  }
  const nodes = all.filter(({ c }) => NODE_BINARIES.has(binaryOf(c)));
  const tlsNodes = nodes.filter(({ c }) => has(c, "--tls-cert"));
  if (tlsNodes.length > 0) {
    for (const { c, where } of nodes) {
      const missing = SERVER_TLS.filter((f) => !has(c, f));
      if (missing.length) {
        problems.push(`${where}: no ${missing.join(", ")}, while ${tlsNodes[0].where} serves TLS: ` +
                      `every node port gets mTLS`);
      }
    }
    for (const { c, where } of all) {
      const binary = binaryOf(c);
      const nccl = binary === "tandem-prefill" &&
        effectiveFlag(c, "--kv-transport", ctx.helps[binary])?.value === "nccl";
      if (binary !== "tandem-router" && !nccl) continue;
      const missing = CLIENT_TLS.filter((f) => !has(c, f));
      if (missing.length) {
        problems.push(`${where}: no ${missing.join(", ")}: it dials nodes that serve mTLS ` +
                      `(--tls-client-ca), which refuse it without TLS and a client certificate`);
      }
    }
  } else {
    for (const { c, where } of all) {
      if (has(c, "--node-tls-ca")) {
        problems.push(`${where}: --node-tls-ca, but no node serves TLS (--tls-cert): every call ` +
                      `to a node would fail its handshake`);
      }
    }
  }
  return problems;
}
