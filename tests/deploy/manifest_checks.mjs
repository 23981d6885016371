// Checks of tandem's rendered Kubernetes objects (the output of `kubectl kustomize`, parsed into
// plain objects): schema validation against the Kubernetes and Prometheus Operator OpenAPI
// schemas (kubernetes-models), and the invariants an operator relies on (probes, graceful
// shutdown, ports that match the binaries, pinned images, resources, pod security, Services,
// the router's DNS discovery, PDBs and HPAs, metrics scraping, GPUs, $(VAR) references,
// Prometheus rules). Every check is a function of the objects (and a context: the binaries'
// parsed --help, the overlay's kind) that returns a list of problems, one sentence each, so the
// checks can be unit-tested on hand-made broken objects (manifest_checks_*.test.mjs) and run on
// every render (manifests.test.mjs).
//
// This file is the entry point the tests import: it re-exports the modules of manifest_checks/
// (packages.mjs: the npm packages; flags.mjs: the binaries' --help and args; objects.mjs,
// values.mjs, env.mjs: helpers over objects; schemas.mjs: schema validation; checks_*.mjs: the
// invariants, by topic) and lists the invariants in CHECKS.
//
// No npm package is imported statically: requirePackages() says what is missing and how to get
// it, instead of an unexplained module-not-found error.

import { checkGracePeriod, checkProbes } from "./manifest_checks/checks_lifecycle.mjs";
import {
  checkMetricsScraping,
  checkPrometheusRuleGroups,
} from "./manifest_checks/checks_monitoring.mjs";
import { checkAccelerators } from "./manifest_checks/checks_overlays.mjs";
import { checkImages, checkPodSecurity, checkResources } from "./manifest_checks/checks_pods.mjs";
import { checkArgs, checkPorts } from "./manifest_checks/checks_ports.mjs";
import { checkEnvReferences, checkReferences } from "./manifest_checks/checks_references.mjs";
import {
  checkDisruptionAndScaling,
  checkHpaTargetsOmitReplicas,
  checkRouterDiscovery,
  checkServices,
} from "./manifest_checks/checks_services.mjs";

export { INSTALL_HINT, requirePackages } from "./manifest_checks/packages.mjs";
export {
  argsOf,
  binaryOf,
  effectiveFlag,
  parseHelp,
  parseHostPort,
  splitFlags,
} from "./manifest_checks/flags.mjs";
export {
  containerPort,
  labelSelectorMatches,
  workloads,
} from "./manifest_checks/objects.mjs";
export { imageProblem, parseQuantity, preStopSleepSeconds } from "./manifest_checks/values.mjs";
export { containerEnv, expandVars, varReferences } from "./manifest_checks/env.mjs";
export { modelClass, validateSchemas } from "./manifest_checks/schemas.mjs";
export { firstDifference } from "./manifest_checks/checks_monitoring.mjs";
export {
  checkAccelerators,
  checkArgs,
  checkDisruptionAndScaling,
  checkEnvReferences,
  checkGracePeriod,
  checkHpaTargetsOmitReplicas,
  checkImages,
  checkMetricsScraping,
  checkPodSecurity,
  checkPorts,
  checkProbes,
  checkPrometheusRuleGroups,
  checkReferences,
  checkResources,
  checkRouterDiscovery,
  checkServices,
};

// The invariant checks manifests.test.mjs runs on every render, in order.
export const CHECKS = [
  ["1. probes are gRPC health checks on the grpc port", checkProbes],
  ["2. grace period covers preStop + drain", checkGracePeriod],
  ["3. container ports match the binaries' listen flags", checkPorts],
  ["4. images are pinned", checkImages],
  ["5. cpu and memory requests and limits", checkResources],
  ["6. pod security and a writable /tmp", checkPodSecurity],
  ["7. Services select pods and target their ports", checkServices],
  ["8. router DNS discovery names headless Services", checkRouterDiscovery],
  ["9. PDBs and HPAs target workloads of the render", checkDisruptionAndScaling],
  ["9b. HPA-scaled workloads leave spec.replicas unset", checkHpaTargetsOmitReplicas],
  ["10. metrics annotations and PodMonitor ports", checkMetricsScraping],
  ["11. GPUs where the overlay says so, nowhere else", checkAccelerators],
  ["12. $(VAR) references resolve", checkEnvReferences],
  ["13. PrometheusRule groups equal tandem-rules.yml", checkPrometheusRuleGroups],
  ["14. args are flags the binaries accept", checkArgs],
  ["15. pods refer only to objects of the render", checkReferences],
];
