// The invariant check of the overlays' accelerators: 11. GPUs (nvidia.com/gpu, --backend cuda, a
// nodeSelector) exactly where the overlay says so, nowhere else; and with a built-in model (the
// cpu overlay), the tandem-config ConfigMap points TANDEM_MODEL_DIR at it.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { binaryOf, effectiveFlag } from "./flags.mjs";
import { NODE_BINARIES, eachContainer, refOf } from "./objects.mjs";
import { parseQuantity } from "./values.mjs";

// 11. With ctx.gpu: prefill and decode containers request and limit nvidia.com/gpu and run
// --backend cuda, their pods have a nodeSelector, nothing else asks for a GPU. Without: nothing
// mentions nvidia.com/gpu and no container runs --backend cuda. With ctx.builtinModelDir: the
// tandem-config ConfigMap's TANDEM_MODEL_DIR is that directory (the model built into the image).
export function checkAccelerators(objects, ctx) {
  const problems = [];
  for (const { w, c, where } of eachContainer(objects)) {
    const binary = binaryOf(c);
    const isNode = NODE_BINARIES.has(binary);
    const backend = effectiveFlag(c, "--backend", ctx.helps[binary])?.value;
    if (ctx.gpu && isNode) {
      for (const section of ["requests", "limits"]) {
        const q = c.resources?.[section]?.["nvidia.com/gpu"];
        if (!(parseQuantity(q) >= 1)) {
          problems.push(`${where}: no resources.${section}["nvidia.com/gpu"] (got ${q})`);
        }
      }
      if (backend !== "cuda") problems.push(`${where}: --backend is ${backend}, not cuda`);
      if (Object.keys(w.pod.spec?.nodeSelector ?? {}).length === 0) {
        problems.push(`${w.ref}: no nodeSelector for its GPU nodes`);
      }
    } else if (ctx.gpu) {
      if (JSON.stringify(c.resources ?? {}).includes("nvidia.com/gpu")) {
        problems.push(`${where}: asks for a GPU it does not use`);
      }
    } else if (backend === "cuda") {
      problems.push(`${where}: --backend cuda in a render without GPUs`);
    }
  }
  if (!ctx.gpu) {
    for (const o of objects) {
      if (JSON.stringify(o).includes("nvidia.com/gpu")) {
        problems.push(`${refOf(o)}: mentions nvidia.com/gpu in a render without GPUs`);
      }
    }
  }
  if (ctx.builtinModelDir !== undefined) {
    const configs = objects.filter((o) => o?.kind === "ConfigMap" &&
                                          /^tandem-config(-[a-z0-9]+)?$/.test(o.metadata?.name));
    if (configs.length === 0) problems.push(`no tandem-config ConfigMap in the render`);
    for (const cm of configs) {
      const dir = cm.data?.TANDEM_MODEL_DIR;
      if (dir !== ctx.builtinModelDir) {
        problems.push(`${refOf(cm)}: TANDEM_MODEL_DIR is ${dir}, not the image's built-in ` +
                      `${ctx.builtinModelDir}`);
      }
    }
  }
  return problems;
}
