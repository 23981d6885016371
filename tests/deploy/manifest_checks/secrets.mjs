// Secrets and the files containers read from them: OPERATOR_SECRETS, the Secrets the manifests
// mount but never contain (the operator creates them, as deploy/README.md says: a key committed to
// the repository is no secret), findSecret() (a Secret of the render, or one of those), and
// fileSource(), which finds the volume, Secret or ConfigMap and key a path in a container comes
// from. FILE_FLAGS lists the tandem flags that name such files.

import path from "node:path";

import { findObject } from "./objects.mjs";

// The Secrets the operator creates (deploy/README.md#secrets-the-operator-creates), with the
// keys the guide tells them to have. A manifest may refer to these without containing them; any
// other Secret it refers to must be in the render (check 15).
export const OPERATOR_SECRETS = new Map([
  ["tandem-cluster-secret", { keys: ["secret"] }],
  ["tandem-node-tls", { keys: ["tls.crt", "tls.key", "ca.crt"] }],
  ["tandem-router-tls", { keys: ["tls.crt", "tls.key", "ca.crt"] }],
  ["tandem-api-keys", { keys: ["keys"] }],
]);

// The flags of tandem binaries that name a file, and whether the file is secret (key material: it
// must come from a Secret) or public (a certificate: a Secret or a ConfigMap).
export const FILE_FLAGS = new Map([
  ["--cluster-secret-file", { secret: true }],
  ["--tls-key", { secret: true }],
  ["--node-tls-key", { secret: true }],
  ["--api-key-file", { secret: true }],
  ["--tls-cert", { secret: false }],
  ["--tls-client-ca", { secret: false }],
  ["--node-tls-ca", { secret: false }],
  ["--node-tls-cert", { secret: false }],
]);

// The Secret named `name`: the render's object, or for an operator Secret a stand-in whose data
// has the documented keys ({operator: true}); undefined when it is neither.
export function findSecret(objects, name) {
  const obj = findObject(objects, "Secret", name);
  if (obj) return obj;
  const documented = OPERATOR_SECRETS.get(name);
  if (!documented) return undefined;
  return {
    kind: "Secret",
    metadata: { name },
    operator: true,
    data: Object.fromEntries(documented.keys.map((k) => [k, "<created by the operator>"])),
  };
}

// The keys a Secret or ConfigMap object provides.
export const keysOf = (obj) => [...Object.keys(obj?.data ?? {}), ...Object.keys(obj?.stringData ?? {}),
                                ...Object.keys(obj?.binaryData ?? {})];

// Where the file at `file` in `container` (of the pod template `pod`) comes from:
// {mount, volume, kind: "Secret" | "ConfigMap" | "emptyDir" | ..., name, key, mode} (key: the
// Secret's or ConfigMap's key, undefined when the volume lists items and none is that file; mode:
// the file mode the volume gives it, undefined for the API's default, 0644), or null when no
// volume the container mounts holds that path.
export function fileSource(pod, container, file) {
  const p = path.posix.normalize(String(file));
  const mounts = [...(container.volumeMounts ?? [])]
    .filter((m) => {
      const mp = path.posix.normalize(String(m.mountPath)).replace(/(.)\/$/, "$1");
      return p === mp || p.startsWith(`${mp}/`);
    })
    .sort((a, b) => b.mountPath.length - a.mountPath.length);
  const mount = mounts[0];
  if (!mount) return null;
  const mp = path.posix.normalize(String(mount.mountPath)).replace(/(.)\/$/, "$1");
  let rel = p === mp ? "" : p.slice(mp.length + 1);
  if (mount.subPath) rel = rel ? `${mount.subPath}/${rel}` : mount.subPath;
  const volume = (pod.spec?.volumes ?? []).find((v) => v.name === mount.name);
  const out = { mount, volume, kind: undefined, name: undefined, key: undefined, mode: undefined };
  if (!volume) return out;
  const fromSource = (kind, src, defaultMode) => {
    const items = src.items;
    if (items?.length) {
      const item = items.find((i) => path.posix.normalize(i.path) === rel);
      if (!item) return { ...out, kind, name: src.secretName ?? src.name, key: undefined };
      return { ...out, kind, name: src.secretName ?? src.name, key: item.key,
               mode: item.mode ?? defaultMode };
    }
    return { ...out, kind, name: src.secretName ?? src.name, key: rel, mode: defaultMode };
  };
  if (volume.secret) return fromSource("Secret", volume.secret, volume.secret.defaultMode);
  if (volume.configMap) return fromSource("ConfigMap", volume.configMap, volume.configMap.defaultMode);
  if (volume.projected) {
    // A source that lists the file among its items, else the only source that lists no items.
    const sources = (volume.projected.sources ?? []).filter((s) => s.secret ?? s.configMap);
    const kindOf = (s) => (s.secret ? "Secret" : "ConfigMap");
    for (const s of sources.filter((s) => (s.secret ?? s.configMap).items?.length)) {
      const found = fromSource(kindOf(s), s.secret ?? s.configMap, volume.projected.defaultMode);
      if (found.key !== undefined) return found;
    }
    const open = sources.filter((s) => !(s.secret ?? s.configMap).items?.length);
    if (open.length === 1) {
      return fromSource(kindOf(open[0]), open[0].secret ?? open[0].configMap,
                        volume.projected.defaultMode);
    }
    return { ...out, kind: "projected" };
  }
  return { ...out, kind: Object.keys(volume).find((k) => k !== "name") };
}

// "0400" for 256.
export const octal = (mode) => `0${Number(mode).toString(8)}`;
