// The check of components/tls/cert-manager.example.yaml against a render that mounts the TLS
// Secrets (base + components/tls): cert-manager's objects have no schema package here, so this
// checks what matters: every TLS Secret the pods read is a Certificate's secretName; node
// certificates carry the name the router and prefill pods verify (--node-tls-server-name, DNS
// SAN) and the key usages they are used for (server auth; client auth when presented by a
// client); a certificate whose ca.crt the pods trust is issued by a CA issuer of the example
// (which writes ca.crt), itself backed by an isCA Certificate; every issuerRef resolves; no
// field is misspelt (the fields tandem's example uses, from cert-manager.io/v1).

import { binaryOf, effectiveFlag, givenFlag } from "./flags.mjs";
import { NODE_BINARIES, eachContainer, refOf } from "./objects.mjs";
import { fileSource } from "./secrets.mjs";

const KINDS = new Set(["Issuer", "ClusterIssuer", "Certificate"]);
const CERTIFICATE_SPEC = new Set([
  "secretName", "commonName", "dnsNames", "ipAddresses", "uris", "emailAddresses", "usages",
  "duration", "renewBefore", "renewBeforePercentage", "privateKey", "issuerRef", "isCA",
  "subject", "secretTemplate", "keystores", "literalSubject", "revisionHistoryLimit",
  "additionalOutputFormats", "nameConstraints", "otherNames", "encodeUsagesInRequest",
]);
const PRIVATE_KEY = new Set(["algorithm", "size", "encoding", "rotationPolicy"]);
const ISSUER_SPEC = new Set(["selfSigned", "ca", "acme", "vault", "venafi"]);

// Problems of `example` (the parsed objects of the example file) against `render`.
export function checkCertManagerExample(example, render, ctx) {
  const problems = [];
  const certs = example.filter((o) => o?.kind === "Certificate");
  const issuers = example.filter((o) => o?.kind === "Issuer");
  for (const o of example) {
    if (o?.apiVersion !== "cert-manager.io/v1" || !KINDS.has(o?.kind)) {
      problems.push(`${refOf(o)}: expected cert-manager.io/v1 Issuer, ClusterIssuer or ` +
                    `Certificate, got ${o?.apiVersion} ${o?.kind}`);
      continue;
    }
    const known = o.kind === "Certificate" ? CERTIFICATE_SPEC : ISSUER_SPEC;
    for (const k of Object.keys(o.spec ?? {})) {
      if (!known.has(k)) problems.push(`${refOf(o)}: unknown field spec.${k}`);
    }
    for (const k of Object.keys(o.spec?.privateKey ?? {})) {
      if (!PRIVATE_KEY.has(k)) problems.push(`${refOf(o)}: unknown field spec.privateKey.${k}`);
    }
    if (o.kind === "Certificate") {
      if (!o.spec?.secretName) problems.push(`${refOf(o)}: no spec.secretName`);
      const ref = o.spec?.issuerRef ?? {};
      if ((ref.kind ?? "Issuer") === "Issuer" && !issuers.some((i) => i.metadata?.name === ref.name)) {
        problems.push(`${refOf(o)}: issuerRef names Issuer ${ref.name}, not in the example`);
      }
    }
    if (o.kind !== "Certificate" && Object.keys(o.spec ?? {}).filter((k) => ISSUER_SPEC.has(k)).length !== 1) {
      problems.push(`${refOf(o)}: an issuer needs exactly one of ${[...ISSUER_SPEC].join(", ")}`);
    }
    if (o.spec?.ca && !certs.some((c) => c.spec?.secretName === o.spec.ca.secretName && c.spec?.isCA)) {
      problems.push(`${refOf(o)}: its CA Secret ${o.spec.ca.secretName} is no isCA Certificate's`);
    }
  }

  // What the render's pods read: Secret name -> {keys read, roles ("server" | "client"), by}; the
  // Secrets node servers present (their --tls-cert), and the names their clients verify.
  const uses = new Map();
  const nodeServerSecrets = new Set();
  const verifiedNames = new Set();
  for (const { w, c, where } of eachContainer(render)) {
    const help = ctx.helps?.[binaryOf(c)];
    const read = (flag, role) => {
      const file = givenFlag(c, flag, help);
      if (!file) return null;
      const src = fileSource(w.pod, c, file);
      if (src?.kind !== "Secret" || !src.name) return null;
      if (!uses.has(src.name)) uses.set(src.name, { keys: new Set(), roles: new Set(), by: new Set() });
      const u = uses.get(src.name);
      u.keys.add(src.key);
      if (role) u.roles.add(role);
      u.by.add(where);
      return src.name;
    };
    const server = read("--tls-cert", "server");
    if (server && NODE_BINARIES.has(binaryOf(c))) nodeServerSecrets.add(server);
    read("--tls-key", null);
    read("--tls-client-ca", null);
    read("--node-tls-cert", "client");
    read("--node-tls-key", null);
    if (read("--node-tls-ca", null)) {
      verifiedNames.add(effectiveFlag(c, "--node-tls-server-name", help)?.value ?? "tandem-node");
    }
  }
  for (const [name, u] of uses) {
    const cert = certs.find((c) => c.spec?.secretName === name);
    if (!cert) {
      problems.push(`Secret ${name} (read by ${[...u.by].join(", ")}) is no Certificate's ` +
                    `secretName in the example`);
      continue;
    }
    const usages = cert.spec?.usages;
    for (const role of u.roles) {
      if (usages && !usages.includes(`${role} auth`)) {
        problems.push(`${refOf(cert)}: used as a ${role} certificate but its usages lack ` +
                      `'${role} auth'`);
      }
    }
    if (nodeServerSecrets.has(name)) {
      for (const verified of verifiedNames) {
        if (!(cert.spec?.dnsNames ?? []).includes(verified)) {
          problems.push(`${refOf(cert)}: dnsNames ${JSON.stringify(cert.spec?.dnsNames ?? [])} ` +
                        `lack '${verified}', the name the nodes' clients verify ` +
                        `(--node-tls-server-name)`);
        }
      }
    }
    if (u.keys.has("ca.crt")) {
      const ref = cert.spec?.issuerRef ?? {};
      const issuer = issuers.find((i) => i.metadata?.name === ref.name);
      if (!issuer?.spec?.ca) {
        problems.push(`${refOf(cert)}: pods trust its ca.crt, but its issuer ${ref.name} is no CA ` +
                      `issuer of the example (spec.ca), which is what writes ca.crt`);
      }
    }
  }
  if (uses.size === 0) problems.push(`the render mounts no TLS Secret (render base + components/tls)`);
  return problems;
}
