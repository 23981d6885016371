// Loads node-llama-cpp's prebuilt CPU llama.cpp, failing with a clear message when the npm
// dependencies are missing. Scripts elsewhere in the repo import this file so that the
// package resolves from tests/conformance/node_modules.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const NODE_MODULES = path.resolve(here, "..", "node_modules");

export async function loadLlama({ maxThreads = 0 } = {}) {
  if (!fs.existsSync(path.join(NODE_MODULES, "node-llama-cpp", "package.json"))) {
    throw new Error(`node-llama-cpp is missing from ${NODE_MODULES}: run scripts/install-deps.sh`);
  }
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  // maxThreads 0: every context gets exactly the threads it asks for.
  return getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads });
}
