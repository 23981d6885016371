// The invariant checks of the binaries' command lines: 3. the container ports are the ports the
// binary listens on (fixed, not loopback); 14. the args are flags the binary's --help lists,
// each given once.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import {
  argsOf,
  binaryOf,
  effectiveFlag,
  isLoopback,
  parseHostPort,
  splitFlags,
} from "./flags.mjs";
import { containerPort, eachContainer } from "./objects.mjs";

const PORT_FLAGS = [
  ["grpc", "--listen"],
  ["metrics", "--metrics-listen"],
  ["http", "--http-listen"],
];

// 3. The container ports named grpc / metrics / http are the ports the binary (command[0])
// listens on: --listen / --metrics-listen / --http-listen from the args, else the --help default.
// Port 0 (a random port) and loopback addresses are errors: probes, Services and other pods need
// a fixed port on the pod's address.
export function checkPorts(objects, ctx) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const binary = binaryOf(c);
    if (!binary) {
      problems.push(`${where}: no command: cannot tell which tandem binary it runs`);
      continue;
    }
    const help = ctx.helps[binary];
    if (!help) {
      problems.push(`${where}: runs ${binary}, not a tandem binary this test knows ` +
                    `(${Object.keys(ctx.helps).join(", ")})`);
      continue;
    }
    for (const [name, flag] of PORT_FLAGS) {
      const declared = containerPort(c, name);
      const eff = effectiveFlag(c, flag, help);
      if (!eff) {
        if (declared !== undefined) {
          problems.push(`${where}: declares a port named ${name} but ${binary} has no ${flag}`);
        }
        continue;
      }
      const { value, source } = eff;
      if (value === null) {
        problems.push(`${where}: ${binary} ${flag} has no default in --help and is not set`);
        continue;
      }
      if (value === "") {
        if (declared !== undefined) {
          problems.push(`${where}: declares port ${name} ${declared} but ${flag} is off`);
        }
        continue;
      }
      const hp = parseHostPort(value);
      if (!hp) {
        problems.push(`${where}: ${flag} '${value}' (${source}) is not HOST:PORT`);
        continue;
      }
      if (hp.port === 0) {
        problems.push(`${where}: ${flag} ${value} (${source}) listens on port 0 (a random free ` +
                      `port); Kubernetes needs a fixed one: set ${flag}=0.0.0.0:PORT`);
        continue;
      }
      if (isLoopback(hp.host)) {
        problems.push(`${where}: ${flag} ${value} (${source}) listens on loopback only: ` +
                      `probes, Services and other pods cannot reach it`);
      }
      if (declared === undefined) {
        problems.push(`${where}: ${binary} listens on port ${hp.port} (${flag}, ${source}) but ` +
                      `the container declares no port named ${name}`);
      } else if (declared !== hp.port) {
        problems.push(`${where}: port ${name} is ${declared} but ${binary} listens on ` +
                      `${hp.port} (${flag} ${value}, ${source})`);
      }
    }
  }
  return problems;
}

// 14. Each container's arguments are flags its binary's --help lists (tandem binaries exit at
// start on an unknown flag), with values where they take one, and no flag is given twice (the
// last would silently win, usually an overlay patch adding what the base already sets).
export function checkArgs(objects, ctx) {
  const problems = [];
  for (const { c, where } of eachContainer(objects)) {
    const help = ctx.helps[binaryOf(c)];
    if (!help) continue;  // checkPorts reports containers that run no known binary
    const { flags, problems: argProblems } = splitFlags(argsOf(c), help);
    problems.push(...argProblems.map((p) => `${where}: ${p}`));
    const counts = new Map();
    for (const f of flags) counts.set(f.name, (counts.get(f.name) ?? 0) + 1);
    for (const [name, n] of counts) {
      if (n > 1) problems.push(`${where}: ${name} is given ${n} times (the last one wins)`);
    }
  }
  return problems;
}
