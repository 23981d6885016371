// Unit tests of manifest_checks.mjs's checks of references by name (12. $(VAR) references, 15.
// PVCs, volumes, ServiceAccounts): each passes the correct fixture and fails, saying why, on a copy
// broken in one place.

import { describe, it } from "node:test";

import { checkEnvReferences, checkReferences, requirePackages } from "./manifest_checks.mjs";
import { assertCatches, container, get, podSpec } from "./manifest_checks/fixtures.mjs";

await requirePackages();

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
