// Checks of tandem's rendered Kubernetes objects (the output of `kubectl kustomize`, parsed into
// plain objects): schema validation against the Kubernetes and Prometheus Operator OpenAPI
// schemas (kubernetes-models), and the invariants an operator relies on (probes, graceful
// shutdown, ports that match the binaries, pinned images, resources, pod security, Services,
// the router's DNS discovery, PDBs and HPAs, metrics scraping, GPUs, $(VAR) references,
// Prometheus rules, the cluster secret, secret files, TLS, NetworkPolicies, lease limits). Every
// check is a function of the objects (and a context: the binaries' parsed --help, the overlay's
// kind) that returns a list of problems, one sentence each, so the checks can be unit-tested on
// hand-made broken objects (manifest_checks_*.test.mjs) and run on every render
// (manifests.test.mjs).
//
// This file is the entry point the tests import: it re-exports the modules of manifest_checks/
// (packages.mjs: the npm packages; flags.mjs: the binaries' --help and args; objects.mjs,
// values.mjs, env.mjs: helpers over objects; secrets.mjs: Secrets the operator creates and the
// files containers read from volumes; network.mjs: NetworkPolicy semantics; schemas.mjs: schema
// validation; checks_*.mjs: the invariants, by topic; checks_certificates.mjs: the cert-manager
// example against the tls component) and lists the invariants in CHECKS.
//
// No npm package is imported statically: requirePackages() says what is missing and how to get
// it, instead of an unexplained module-not-found error.

import { checkGracePeriod, checkProbes } from "./manifest_checks/checks_lifecycle.mjs";
import {
  checkMetricsScraping,
  checkPrometheusRuleGroups,
} from "./manifest_checks/checks_monitoring.mjs";
import { checkCertManagerExample } from "./manifest_checks/checks_certificates.mjs";
import { checkLeaseLimits } from "./manifest_checks/checks_limits.mjs";
import { checkNetworkFlows, checkNetworkPolicies } from "./manifest_checks/checks_network.mjs";
import { checkAccelerators } from "./manifest_checks/checks_overlays.mjs";
import { checkImages, checkPodSecurity, checkResources } from "./manifest_checks/checks_pods.mjs";
import { checkArgs, checkPorts } from "./manifest_checks/checks_ports.mjs";
import { checkEnvReferences, checkReferences } from "./manifest_checks/checks_references.mjs";
import {
  checkClusterSecret,
  checkSecretFiles,
  checkTls,
} from "./manifest_checks/checks_secrets.mjs";
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
  givenFlag,
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
export {
  FILE_FLAGS,
  OPERATOR_SECRETS,
  fileSource,
  findSecret,
} from "./manifest_checks/secrets.mjs";
export {
  EXTERNAL,
  allowed,
  cidrContains,
  kvPortRange,
  policyTypes,
  workloadPrincipals,
} from "./manifest_checks/network.mjs";
export { modelClass, validateSchemas } from "./manifest_checks/schemas.mjs";
export { firstDifference } from "./manifest_checks/checks_monitoring.mjs";
export {
  checkAccelerators,
  checkArgs,
  checkCertManagerExample,
  checkClusterSecret,
  checkDisruptionAndScaling,
  checkEnvReferences,
  checkGracePeriod,
  checkHpaTargetsOmitReplicas,
  checkImages,
  checkLeaseLimits,
  checkMetricsScraping,
  checkNetworkFlows,
  checkNetworkPolicies,
  checkPodSecurity,
  checkPorts,
  checkProbes,
  checkPrometheusRuleGroups,
  checkReferences,
  checkResources,
  checkRouterDiscovery,
  checkSecretFiles,
  checkServices,
  checkTls,
};

// The invariant checks manifests.test.mjs runs on every render, in order.
export const CHECKS = [
  ["1. probes: gRPC health checks on the grpc port (TCP / HTTP(S) probes where it is TLS)",
   checkProbes],
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
  ["15. pods refer only to objects of the render (or Secrets the operator creates)",
   checkReferences],
  ["16. prefill and decode nodes share one cluster secret", checkClusterSecret],
  ["17. secret files: read-only Secret mounts, 0400, no subPath, no keys in args",
   checkSecretFiles],
  ["18. TLS: mTLS on every node port or none, clients dial to match", checkTls],
  ["19. NetworkPolicies select pods and name ports they use", checkNetworkPolicies],
  ["20. NetworkPolicies allow tandem's traffic and keep node ports to the router and pools",
   checkNetworkFlows],
  ["21. leases fit the decode nodes' --max-lease-ms", checkLeaseLimits],
];
