// Unit tests of manifest_checks.mjs's accelerator check (11): GPUs exactly where the overlay says
// so, and the cpu overlay's built-in model; it passes the correct (cpu or GPU) fixture and fails,
// saying why, on a copy broken in one place.

import { describe, it } from "node:test";

import { checkAccelerators, requirePackages } from "./manifest_checks.mjs";
import {
  CTX,
  assertCatches,
  container,
  get,
  good,
  goodGpu,
  podSpec,
} from "./manifest_checks/fixtures.mjs";

await requirePackages();

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
