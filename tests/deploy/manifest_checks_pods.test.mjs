// Unit tests of manifest_checks.mjs's checks of containers (4. images, 5. resources, 6. pod
// security): each passes the correct fixture and fails, saying why, on a copy broken in one place.

import { describe, it } from "node:test";

import {
  checkImages,
  checkPodSecurity,
  checkResources,
  requirePackages,
} from "./manifest_checks.mjs";
import { assertCatches, container, podSpec } from "./manifest_checks/fixtures.mjs";

await requirePackages();

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
