// The invariant checks of probes and graceful shutdown: 1. every container's startup, readiness
// and liveness probes are the gRPC health check on its grpc port; 2. the pod's grace period covers
// the preStop sleep plus the binary's drain timeout.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { binaryOf, effectiveFlag } from "./flags.mjs";
import { containerPort, eachContainer } from "./objects.mjs";
import { preStopSleepSeconds } from "./values.mjs";

const PROBES = ["startupProbe", "readinessProbe", "livenessProbe"];
const PROBE_HANDLERS = ["grpc", "httpGet", "tcpSocket", "exec"];

// 1. Every container has startup, readiness and liveness probes that are the gRPC health check
// on the container's grpc port.
export function checkProbes(objects) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const grpcPort = containerPort(c, "grpc");
    if (grpcPort === undefined) problems.push(`${where}: no container port named grpc`);
    for (const kind of PROBES) {
      const probe = c[kind];
      if (!probe) {
        problems.push(`${where}: no ${kind}`);
        continue;
      }
      const handlers = PROBE_HANDLERS.filter((h) => probe[h] !== undefined);
      if (!probe.grpc || handlers.length !== 1) {
        problems.push(`${where}: ${kind} uses ${handlers.join(" + ") || "no handler"}, ` +
                      `not the gRPC health check alone (grpc.port)`);
        continue;
      }
      if (grpcPort !== undefined && probe.grpc.port !== grpcPort) {
        problems.push(`${where}: ${kind} checks port ${probe.grpc.port}, but the container's ` +
                      `grpc port is ${grpcPort}`);
      }
    }
  }
  return problems;
}

// 2. terminationGracePeriodSeconds > preStop sleep + drain timeout (--drain-timeout-ms, else the
// binary's default), for every container whose binary drains.
export function checkGracePeriod(objects, ctx) {
  const problems = [];
  for (const { w, c, where } of eachContainer(objects)) {
    const help = ctx.helps[binaryOf(c)];
    if (!help?.has("--drain-timeout-ms")) continue;
    const grace = w.pod.spec?.terminationGracePeriodSeconds ?? 30;
    const sleep = preStopSleepSeconds(c);
    if (sleep === null) {
      problems.push(`${where}: cannot tell how long its preStop hook takes (expected sleep N)`);
      continue;
    }
    const drain = effectiveFlag(c, "--drain-timeout-ms", help);
    const drainMs = Number(drain.value);
    if (!Number.isFinite(drainMs) || drain.value === null || drain.value === "") {
      problems.push(`${where}: --drain-timeout-ms '${drain.value}' (${drain.source}) is not a number`);
      continue;
    }
    if (!(grace > sleep + drainMs / 1000)) {
      problems.push(`${where}: terminationGracePeriodSeconds ${grace} must exceed the preStop ` +
                    `sleep (${sleep} s) + --drain-timeout-ms ${drainMs} (${drain.source}) = ` +
                    `${sleep + drainMs / 1000} s, or the kubelet kills requests still draining`);
    }
  }
  return problems;
}
