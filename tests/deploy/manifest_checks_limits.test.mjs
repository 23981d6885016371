// Unit tests of manifest_checks.mjs's check of the KV limits that must agree across binaries
// (21. leases fit the decode nodes' --max-lease-ms): it passes the correct fixture and fails,
// saying why, on a copy broken in one place.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { checkLeaseLimits, requirePackages } from "./manifest_checks.mjs";
import { CTX, assertCatches, container, good } from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("21. leases", () => {
  it("fails a router lease longer than the decode nodes' --max-lease-ms", () => {
    assertCatches(checkLeaseLimits,
      (o) => container(o, "router").args.push("--lease-ms=90000"),
      /container router: --lease-ms 90000 \(args\) exceeds Deployment\/tandem-decode container decode --max-lease-ms 60000 \(default\)/);
    assertCatches(checkLeaseLimits,
      (o) => container(o, "decode").args.push("--max-lease-ms=20000"),
      /container router: --lease-ms 30000 \(default\) exceeds .* --max-lease-ms 20000 \(args\)/);
  });
  it("fails a decode node whose own lease exceeds its cap", () => {
    assertCatches(checkLeaseLimits,
      (o) => container(o, "decode").args.push("--lease-ms=61000"),
      /container decode: --lease-ms 61000 \(args\) exceeds its --max-lease-ms 60000/);
  });
  it("checks nothing against binaries without --max-lease-ms", () => {
    const helps = { ...CTX.helps, "tandem-decode": new Map() };
    const o = good();
    container(o, "router").args.push("--lease-ms=90000");
    assert.deepEqual(checkLeaseLimits(o, { ...CTX, helps }), []);
  });
});
