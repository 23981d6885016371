// The npm packages the deploy tests need (yaml, kubernetes-models and the Prometheus Operator
// models, from tests/deploy/node_modules), checked up front: requirePackages() says what is
// missing and how to get it (INSTALL_HINT), instead of an unexplained module-not-found error.

export const INSTALL_HINT = "run scripts/install-deps.sh";

// Throws, naming what is missing and INSTALL_HINT, unless tests/deploy/node_modules has the
// packages the deploy tests import.
export async function requirePackages() {
  const missing = [];
  for (const spec of [
    "yaml",
    "kubernetes-models/apps/v1/Deployment",
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor",
  ]) {
    try {
      await import(spec);
    } catch (e) {
      missing.push(`${spec} (${e.code ?? e.message})`);
    }
  }
  if (missing.length) {
    throw new Error(
      `npm packages missing from tests/deploy/node_modules: ${missing.join(", ")}; ${INSTALL_HINT}`,
    );
  }
}
