// Unit tests of manifest_checks.mjs's checks of the binaries' command lines (3. ports, 14. args):
// each passes the correct fixture and fails, saying why, on a copy broken in one place.

import { describe, it } from "node:test";

import { checkArgs, checkPorts, requirePackages } from "./manifest_checks.mjs";
import { assertCatches, container, replaceArg } from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("3. ports", () => {
  it("fails a grpc containerPort that is not --listen", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "router").ports[1].containerPort = 50052; },
      /port grpc is 50052 but tandem-router listens on 50051 \(--listen 0.0.0.0:50051, args\)/);
  });
  it("fails a metrics containerPort that is not the binary's default", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").ports[1].containerPort = 9402; },
      /port metrics is 9402 but tandem-decode listens on 9401 .*default/);
  });
  it("reads the --flag value form", () => {
    assertCatches(checkPorts,
      (o) => {
        const args = container(o, "router").args;
        args[args.indexOf("--http-listen") + 1] = "0.0.0.0:8001";
      },
      /port http is 8000 but tandem-router listens on 8001 \(--http-listen 0.0.0.0:8001, args\)/);
  });
  it("fails a router left on its default listen address (port 0)", () => {
    assertCatches(checkPorts,
      (o) => replaceArg(o, "router", "--metrics-listen"),
      /--metrics-listen 127.0.0.1:0 \(default\) listens on port 0/);
  });
  it("fails port 0 given explicitly, and a loopback address", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "prefill").args.push("--listen=0.0.0.0:0"); },
      /--listen 0.0.0.0:0 \(args\) listens on port 0/);
    assertCatches(checkPorts,
      (o) => { container(o, "prefill").args.push("--listen=127.0.0.1:50071"); },
      /listens on loopback only/);
  });
  it("fails a listening port the container does not declare", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").ports.pop(); },
      /listens on port 9401 \(--metrics-listen, default\) but the container declares no port named metrics/);
  });
  it("fails an http port on a binary without --http-listen", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").ports.push({ name: "http", containerPort: 8000 }); },
      /port named http but tandem-decode has no --http-listen/);
  });
  it("fails a container that runs no known binary", () => {
    assertCatches(checkPorts,
      (o) => { container(o, "decode").command = ["tandem-decoder"]; },
      /runs tandem-decoder, not a tandem binary/);
    assertCatches(checkPorts,
      (o) => { delete container(o, "decode").command; },
      /no command/);
  });
});

describe("14. args", () => {
  it("fails an unknown flag, a switch with a value, a flag given twice", () => {
    assertCatches(checkArgs,
      (o) => { container(o, "decode").args.push("--max-batch=8"); },
      /container decode: unknown flag --max-batch/);
    assertCatches(checkArgs,
      (o) => { container(o, "decode").args.push("--no-prefix-caching=true"); },
      /--no-prefix-caching is a switch and takes no value/);
    assertCatches(checkArgs,
      (o) => { container(o, "prefill").args.push("--drain-timeout-ms=5000"); },
      /container prefill: --drain-timeout-ms is given 2 times/);
  });
});
