// Unit tests of manifest_checks.mjs's checks of secrets and TLS (15. Secrets the pods refer to,
// 16. the cluster secret, 17. secret files, 18. TLS, 1. probes where the gRPC port is TLS) and of
// the cert-manager example's check: each passes the correct fixture (good(), or goodSecure() with
// TLS, NetworkPolicies and API keys) and fails, saying why, on a copy broken in one place.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  OPERATOR_SECRETS,
  checkCertManagerExample,
  checkClusterSecret,
  checkProbes,
  checkReferences,
  checkSecretFiles,
  checkTls,
  fileSource,
  requirePackages,
} from "./manifest_checks.mjs";
import {
  CTX,
  assertCatches,
  container,
  get,
  goodSecure,
  podSpec,
  replaceArg,
} from "./manifest_checks/fixtures.mjs";

await requirePackages();

const secure = { base: goodSecure };
const volume = (o, role, name) => podSpec(o, role).volumes.find((v) => v.name === name);

describe("fileSource", () => {
  it("finds the volume, Secret, key and mode of a mounted file", () => {
    const o = goodSecure();
    const src = fileSource(get(o, "Deployment", "tandem-router").spec.template,
                           container(o, "router"), "/etc/tandem/tls/node/ca.crt");
    assert.equal(src.kind, "Secret");
    assert.equal(src.name, "tandem-node-tls");
    assert.equal(src.key, "ca.crt");
    assert.equal(src.mode, 0o400);
    assert.equal(fileSource(get(o, "Deployment", "tandem-router").spec.template,
                            container(o, "router"), "/etc/ssl/x.pem"), null);
  });
});

describe("15. Secrets the pods refer to", () => {
  it("allows the Secrets the operator creates, and no other missing one", () => {
    assert.ok(OPERATOR_SECRETS.has("tandem-cluster-secret"));
    assertCatches(checkReferences,
      (o) => { volume(o, "decode", "cluster-secret").secret.secretName = "my-secret"; },
      /volume cluster-secret uses Secret my-secret, which is neither in the render nor one the operator creates/);
    assertCatches(checkReferences,
      (o) => { podSpec(o, "router").imagePullSecrets = [{ name: "registry-creds" }]; },
      /imagePullSecrets names Secret registry-creds/);
  });
  it("fails a key the operator's Secret does not have", () => {
    assertCatches(checkReferences,
      (o) => { volume(o, "prefill", "cluster-secret").secret.items[0].key = "cluster-secret"; },
      /reads key cluster-secret of Secret tandem-cluster-secret, which has \(as the deploy guide creates it\) keys secret/);
  });
  it("accepts a Secret of the render, with its keys", () => {
    assertCatches(checkReferences,
      (o) => {
        volume(o, "decode", "cluster-secret").secret.secretName = "generated";
        o.push({ apiVersion: "v1", kind: "Secret", metadata: { name: "generated" },
                 data: { other: "eA==" } });
      },
      /reads key secret of Secret generated, which has keys other/);
  });
});

describe("16. cluster secret", () => {
  it("fails a prefill or decode node without --cluster-secret-file", () => {
    assertCatches(checkClusterSecret,
      (o) => replaceArg(o, "prefill", "--cluster-secret-file"),
      /container prefill: no --cluster-secret-file: tandem-prefill refuses to start/);
    assertCatches(checkClusterSecret,
      (o) => replaceArg(o, "decode", "--cluster-secret-file"),
      /container decode: no --cluster-secret-file: the decode node would refuse every Reserve/);
  });
  it("fails --insecure-no-handoff-auth", () => {
    assertCatches(checkClusterSecret,
      (o) => container(o, "decode").args.push("--insecure-no-handoff-auth"),
      /container decode: --insecure-no-handoff-auth: anyone who reaches a node's gRPC port/);
  });
  it("fails a router that holds the cluster secret", () => {
    assertCatches(checkClusterSecret,
      (o) => {
        podSpec(o, "router").volumes.push(
          { name: "hmac", secret: { secretName: "tandem-cluster-secret", defaultMode: 0o400 } });
      },
      /Deployment\/tandem-router: volume hmac holds the cluster secret \(Secret tandem-cluster-secret\); only prefill and decode pods may/);
  });
  it("fails pools that read different secrets", () => {
    assertCatches(checkClusterSecret,
      (o) => { volume(o, "decode", "cluster-secret").secret.secretName = "other-secret"; },
      /must share one cluster secret, but they read Secret tandem-cluster-secret key secret .* and Secret other-secret key secret/);
  });
});

describe("17. secret files", () => {
  it("fails a file in no mounted volume, or in a writable or subPath mount", () => {
    assertCatches(checkSecretFiles,
      (o) => replaceArg(o, "decode", "--cluster-secret-file", "--cluster-secret-file=/run/secret"),
      /--cluster-secret-file \/run\/secret is in no volume the container mounts/);
    assertCatches(checkSecretFiles,
      (o) => { container(o, "prefill").volumeMounts.at(-1).readOnly = false; },
      /volume cluster-secret is mounted writable/);
    assertCatches(checkSecretFiles,
      (o) => {
        const m = container(o, "router").volumeMounts.find((x) => x.name === "node-tls");
        m.mountPath = "/etc/tandem/tls/node/ca.crt";
        m.subPath = "ca.crt";
      },
      /--node-tls-ca \/etc\/tandem\/tls\/node\/ca.crt: volume node-tls is mounted with subPath/,
      secure);
  });
  it("fails key material that other users can read, or the pod's user cannot", () => {
    assertCatches(checkSecretFiles,
      (o) => { delete volume(o, "decode", "cluster-secret").secret.defaultMode; },
      /volume cluster-secret gives it mode 0644 \(the default\); key material wants 0400/);
    assertCatches(checkSecretFiles,
      (o) => { volume(o, "router", "router-tls").secret.items[1].mode = 0o444; },
      /--tls-key .* mode 0444/, secure);
    assertCatches(checkSecretFiles,
      (o) => { delete podSpec(o, "prefill").securityContext.fsGroup; },
      /mode 0400 on a root-owned file, and the pod sets no fsGroup: uid 10001 cannot read it/);
  });
  it("fails key material from a ConfigMap, or a file the volume does not hold", () => {
    assertCatches(checkSecretFiles,
      (o) => {
        const v = volume(o, "decode", "cluster-secret");
        v.configMap = { name: "tandem-config-abc123" };
        delete v.secret;
      },
      /--cluster-secret-file .* comes from volume cluster-secret \(ConfigMap\), not from a Secret/);
    assertCatches(checkSecretFiles,
      (o) => replaceArg(o, "decode", "--tls-key", "--tls-key=/etc/tandem/tls/node/key.pem"),
      /--tls-key \/etc\/tandem\/tls\/node\/key.pem: volume node-tls \(Secret tandem-node-tls\) puts no file there/,
      secure);
  });
  it("fails an API key written in the args", () => {
    assertCatches(checkSecretFiles,
      (o) => container(o, "router").args.push("--api-key=sk-123"),
      /--api-key with a literal key in the args/);
    assertCatches(checkSecretFiles,
      (o) => {
        const c = container(o, "router");
        c.args.push("--api-key=$(KEY)");
        c.env = [{ name: "KEY", value: "sk-123" }];
      },
      /--api-key=\$\(KEY\) takes a key from an env var that no Secret sets/);
  });
});

describe("18. TLS", () => {
  it("fails a node without mTLS while others serve it", () => {
    assertCatches(checkTls,
      (o) => replaceArg(o, "decode", "--tls-client-ca"),
      /container decode: no --tls-client-ca, while .* serves TLS: every node port gets mTLS/,
      secure);
    assertCatches(checkTls,
      (o) => {
        for (const f of ["--tls-cert", "--tls-key", "--tls-client-ca"]) replaceArg(o, "prefill", f);
      },
      /container prefill: no --tls-cert, --tls-key, --tls-client-ca/, secure);
  });
  it("fails a router that dials TLS nodes without a client certificate, or plaintext nodes with TLS", () => {
    assertCatches(checkTls,
      (o) => { replaceArg(o, "router", "--node-tls-cert"); replaceArg(o, "router", "--node-tls-key"); },
      /container router: no --node-tls-cert, --node-tls-key: it dials nodes that serve mTLS/,
      secure);
    assertCatches(checkTls,
      (o) => container(o, "router").args.push("--node-tls-ca=/etc/ca.crt"),
      /container router: --node-tls-ca, but no node serves TLS/);
  });
  it("fails a certificate without its key", () => {
    assertCatches(checkTls,
      (o) => replaceArg(o, "router", "--tls-key"),
      /container router: --tls-cert and --tls-key go together/, secure);
  });
});

describe("1. probes where the gRPC port is TLS", () => {
  it("passes TCP, /metrics and HTTPS /health probes", () => {
    assert.deepEqual(checkProbes(goodSecure(), CTX), []);
  });
  it("fails a gRPC health probe on a TLS port", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "decode").readinessProbe = { grpc: { port: 50061 } }; },
      /container decode: readinessProbe is a gRPC health check, but --tls-cert makes the gRPC port TLS/,
      secure);
  });
  it("fails HTTP on the router's HTTPS port, and HTTPS probes with --tls-client-ca", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "router").livenessProbe.httpGet.scheme = "HTTP"; },
      /livenessProbe uses HTTP on the http port, which --tls-cert makes HTTPS/, secure);
    assertCatches(checkProbes,
      (o) => container(o, "router").args.push("--tls-client-ca=/etc/tandem/tls/node/ca.crt"),
      /startupProbe is an HTTPS GET, but --tls-client-ca makes the router require a client certificate/,
      secure);
  });
  it("fails a TCP probe on another port, a GET of another path, an exec probe", () => {
    assertCatches(checkProbes,
      (o) => { container(o, "prefill").startupProbe.tcpSocket.port = "metrics"; },
      /startupProbe opens port metrics, not the grpc port 50071/, secure);
    assertCatches(checkProbes,
      (o) => { container(o, "decode").livenessProbe.httpGet.path = "/health"; },
      /livenessProbe GETs \/health on the metrics port, which serves only \/metrics/, secure);
    assertCatches(checkProbes,
      (o) => {
        const c = container(o, "decode");
        delete c.livenessProbe.httpGet;
        c.livenessProbe.exec = { command: ["grpc_health_probe"] };
      },
      /livenessProbe uses exec; the image has no probe client/, secure);
  });
});

// A cert-manager example like components/tls/cert-manager.example.yaml.
function example() {
  const cert = (name, spec) => ({
    apiVersion: "cert-manager.io/v1",
    kind: "Certificate",
    metadata: { name },
    spec: { secretName: name, issuerRef: { name: "tandem-ca", kind: "Issuer" }, ...spec },
  });
  return [
    { apiVersion: "cert-manager.io/v1", kind: "Issuer", metadata: { name: "selfsigned" },
      spec: { selfSigned: {} } },
    cert("tandem-ca", { isCA: true, issuerRef: { name: "selfsigned", kind: "Issuer" } }),
    { apiVersion: "cert-manager.io/v1", kind: "Issuer", metadata: { name: "tandem-ca" },
      spec: { ca: { secretName: "tandem-ca" } } },
    cert("tandem-node-tls", { dnsNames: ["tandem-node"],
                              usages: ["digital signature", "server auth", "client auth"] }),
    cert("tandem-router-tls", { dnsNames: ["tandem.example.com"], usages: ["server auth"] }),
  ];
}

describe("the cert-manager example", () => {
  const check = (breakIt) => {
    const e = example();
    breakIt(e);
    return checkCertManagerExample(e, goodSecure(), CTX);
  };
  const cert = (e, name) => e.find((o) => o.kind === "Certificate" && o.metadata.name === name);
  it("passes the example that matches the tls component", () => {
    assert.deepEqual(check(() => {}), []);
  });
  it("fails a missing Certificate, SAN or usage", () => {
    assert.match(check((e) => e.splice(e.indexOf(cert(e, "tandem-router-tls")), 1)).join("\n"),
                 /Secret tandem-router-tls .* is no Certificate's secretName/);
    assert.match(check((e) => { cert(e, "tandem-node-tls").spec.dnsNames = ["node"]; }).join("\n"),
                 /dnsNames \["node"\] lack 'tandem-node', the name the nodes' clients verify/);
    assert.match(check((e) => { cert(e, "tandem-node-tls").spec.usages.pop(); }).join("\n"),
                 /used as a client certificate but its usages lack 'client auth'/);
  });
  it("fails a trusted ca.crt from an issuer that writes none, and misspelt fields", () => {
    assert.match(check((e) => { cert(e, "tandem-node-tls").spec.issuerRef.name = "selfsigned"; })
      .join("\n"), /pods trust its ca.crt, but its issuer selfsigned is no CA issuer/);
    assert.match(check((e) => { cert(e, "tandem-node-tls").spec.dnsName = ["x"]; }).join("\n"),
                 /Certificate\/tandem-node-tls: unknown field spec.dnsName/);
    assert.match(check((e) => { cert(e, "tandem-router-tls").spec.issuerRef.name = "ca"; })
      .join("\n"), /issuerRef names Issuer ca, not in the example/);
  });
});
