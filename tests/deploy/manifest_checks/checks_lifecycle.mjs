// The invariant checks of probes and graceful shutdown: 1. every container's startup, readiness
// and liveness probes are the gRPC health check on its grpc port, or, where that port serves TLS
// (which kubelet gRPC probes cannot speak), a TCP connect to it, a GET of /metrics on the
// plain-HTTP metrics port, or an HTTPS GET of the router's /health or /ready; 2. the pod's grace
// period covers the preStop sleep plus the binary's drain timeout.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { binaryOf, effectiveFlag, givenFlag } from "./flags.mjs";
import { containerPort, eachContainer } from "./objects.mjs";
import { preStopSleepSeconds } from "./values.mjs";

const PROBES = ["startupProbe", "readinessProbe", "livenessProbe"];
const PROBE_HANDLERS = ["grpc", "httpGet", "tcpSocket", "exec"];

// A probe's port (a number or a container port's name) as a number, or undefined.
function probePort(c, port) {
  return typeof port === "string" ? containerPort(c, port) : port;
}

// 1. Every container has startup, readiness and liveness probes. Where the container's gRPC port
// is plaintext, each is the gRPC health check on that port (it turns NOT_SERVING when the binary
// drains). With --tls-cert the gRPC port speaks TLS, which kubelet gRPC probes cannot (they would
// always fail), and node ports also want a client certificate; then each probe is one of: a TCP
// connect to the grpc port (it listens once the model is loaded and closes when draining), an
// HTTP GET of /metrics on the metrics port (metrics stay plain HTTP; the process must answer), or
// an HTTPS GET of /health or /ready on the router's http port (kubelet HTTPS probes skip
// verification but send no client certificate, so not with --tls-client-ca). Never exec: the
// image has no probe client.
export function checkProbes(objects, ctx = {}) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const grpcPort = containerPort(c, "grpc");
    if (grpcPort === undefined) problems.push(`${where}: no container port named grpc`);
    const help = ctx.helps?.[binaryOf(c)];
    const cert = givenFlag(c, "--tls-cert", help);
    const tls = cert !== undefined && cert !== "";
    const clientCa = givenFlag(c, "--tls-client-ca", help);
    const mtls = tls && clientCa !== undefined && clientCa !== "";
    const metricsPort = containerPort(c, "metrics");
    const httpPort = containerPort(c, "http");
    const metricsOn = effectiveFlag(c, "--metrics-listen", help)?.value !== "";
    for (const kind of PROBES) {
      const probe = c[kind];
      if (!probe) {
        problems.push(`${where}: no ${kind}`);
        continue;
      }
      const handlers = PROBE_HANDLERS.filter((h) => probe[h] !== undefined);
      if (handlers.length !== 1) {
        problems.push(`${where}: ${kind} uses ${handlers.join(" + ") || "no handler"}, not one ` +
                      `handler`);
        continue;
      }
      const [handler] = handlers;
      if (!tls) {
        if (handler !== "grpc") {
          problems.push(`${where}: ${kind} uses ${handler}, not the gRPC health check alone ` +
                        `(grpc.port)`);
        } else if (grpcPort !== undefined && probe.grpc.port !== grpcPort) {
          problems.push(`${where}: ${kind} checks port ${probe.grpc.port}, but the container's ` +
                        `grpc port is ${grpcPort}`);
        }
        continue;
      }
      if (handler === "grpc") {
        problems.push(`${where}: ${kind} is a gRPC health check, but --tls-cert makes the gRPC ` +
                      `port TLS, which kubelet gRPC probes do not speak: it would always fail ` +
                      `(use tcpSocket on grpc, or httpGet /metrics on the metrics port)`);
      } else if (handler === "tcpSocket") {
        const port = probePort(c, probe.tcpSocket.port);
        if (port === undefined || port !== grpcPort) {
          problems.push(`${where}: ${kind} opens port ${probe.tcpSocket.port}, not the grpc port ` +
                        `${grpcPort}`);
        }
      } else if (handler === "httpGet") {
        const g = probe.httpGet;
        const port = probePort(c, g.port);
        const scheme = g.scheme ?? "HTTP";
        if (port !== undefined && port === metricsPort) {
          if (!metricsOn) problems.push(`${where}: ${kind} GETs the metrics port, which is off`);
          if (g.path !== "/metrics") {
            problems.push(`${where}: ${kind} GETs ${g.path} on the metrics port, which serves ` +
                          `only /metrics`);
          }
          if (scheme !== "HTTP") {
            problems.push(`${where}: ${kind} uses ${scheme} on the metrics port, which is plain ` +
                          `HTTP`);
          }
        } else if (port !== undefined && port === httpPort) {
          if (scheme !== "HTTPS") {
            problems.push(`${where}: ${kind} uses ${scheme} on the http port, which --tls-cert ` +
                          `makes HTTPS`);
          }
          if (g.path !== "/health" && g.path !== "/ready") {
            problems.push(`${where}: ${kind} GETs ${g.path}; the router answers probes on ` +
                          `/health and /ready`);
          }
          if (mtls) {
            problems.push(`${where}: ${kind} is an HTTPS GET, but --tls-client-ca makes the ` +
                          `router require a client certificate, which the kubelet does not ` +
                          `present: it would always fail (use tcpSocket on grpc)`);
          }
        } else {
          problems.push(`${where}: ${kind} GETs port ${g.port}, neither the metrics port nor ` +
                        `the http port`);
        }
      } else {
        problems.push(`${where}: ${kind} uses ${handler}; the image has no probe client (use ` +
                      `tcpSocket on grpc, or httpGet /metrics on the metrics port)`);
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
