// Unit tests of manifest_checks.mjs's helpers: the correct fixture passes every check and the
// schemas (plain and GPU), parseHelp() reads the binaries' --help, and the flag, address, quantity,
// preStop, label selector, $(VAR), image and difference helpers.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  CHECKS,
  effectiveFlag,
  expandVars,
  firstDifference,
  imageProblem,
  labelSelectorMatches,
  parseHostPort,
  parseQuantity,
  preStopSleepSeconds,
  requirePackages,
  splitFlags,
  validateSchemas,
  varReferences,
} from "./manifest_checks.mjs";
import { CTX, HELPS, good, goodGpu, goodSecure } from "./manifest_checks/fixtures.mjs";

await requirePackages();

describe("the correct fixture", () => {
  it("passes every check and the schemas (plain, GPU, with TLS and NetworkPolicies)", async () => {
    for (const [title, check] of CHECKS) assert.deepEqual(check(good(), CTX), [], title);
    const gpuCtx = { ...CTX, gpu: true };
    for (const [title, check] of CHECKS) assert.deepEqual(check(goodGpu(), gpuCtx), [], title);
    for (const [title, check] of CHECKS) assert.deepEqual(check(goodSecure(), CTX), [], title);
    assert.deepEqual(await validateSchemas(good()), []);
    assert.deepEqual(await validateSchemas(goodGpu()), []);
    assert.deepEqual(await validateSchemas(goodSecure()), []);
  });
});

describe("parseHelp", () => {
  it("reads flags, whether they take a value, and defaults that wrap across lines", () => {
    const router = HELPS["tandem-router"];
    assert.deepEqual(router.get("--listen"), { takesValue: true, default: "127.0.0.1:0" });
    assert.deepEqual(router.get("--drain-timeout-ms"), { takesValue: true, default: "30000" });
    assert.deepEqual(router.get("--verbose"), { takesValue: false, default: null });
    assert.deepEqual(router.get("--mode"), { takesValue: true, default: null });
    assert.deepEqual(router.get("--prefill-dns"), { takesValue: true, default: null });
    assert.equal(router.has("--decode"), false, "usage lines are not flag entries");
    const decode = HELPS["tandem-decode"];
    assert.equal(decode.get("--metrics-listen").default, "0.0.0.0:9401");
    assert.equal(decode.get("--drain-timeout-ms").default, "30000");
    assert.equal(decode.get("--backend").default, "cpu");
    assert.deepEqual(decode.get("--no-prefix-caching"), { takesValue: false, default: null });
  });
});

describe("helpers", () => {
  it("splitFlags follows the binaries' parser", () => {
    const help = HELPS["tandem-decode"];
    assert.deepEqual(splitFlags(["--listen", "0.0.0.0:1", "--threads=2", "--no-prefix-caching"], help),
                     { flags: [{ name: "--listen", value: "0.0.0.0:1" },
                               { name: "--threads", value: "2" },
                               { name: "--no-prefix-caching", value: undefined }],
                       problems: [] });
    assert.match(splitFlags(["--bogus=1"], help).problems[0], /unknown flag --bogus/);
    assert.match(splitFlags(["positional"], help).problems[0], /unexpected argument/);
    assert.match(splitFlags(["--threads"], help).problems[0], /needs a value/);
    assert.match(splitFlags(["--no-prefix-caching=1"], help).problems[0], /takes no value/);
  });

  it("effectiveFlag: the last given value, else the --help default", () => {
    const help = HELPS["tandem-decode"];
    const c = { command: ["tandem-decode"], args: ["--listen=0.0.0.0:1", "--listen", "0.0.0.0:2"] };
    assert.deepEqual(effectiveFlag(c, "--listen", help), { value: "0.0.0.0:2", source: "args" });
    assert.deepEqual(effectiveFlag(c, "--metrics-listen", help),
                     { value: "0.0.0.0:9401", source: "default" });
    assert.equal(effectiveFlag(c, "--http-listen", help), undefined);
  });

  it("parses host:port, quantities, preStop sleeps, label selectors", () => {
    assert.deepEqual(parseHostPort("0.0.0.0:50061"), { host: "0.0.0.0", port: 50061 });
    assert.deepEqual(parseHostPort("[::]:80"), { host: "[::]", port: 80 });
    assert.deepEqual(parseHostPort(":80"), { host: "", port: 80 });
    assert.equal(parseHostPort("50061"), null);
    assert.equal(parseQuantity("250m"), 0.25);
    assert.equal(parseQuantity("8Gi"), 8 * 2 ** 30);
    assert.equal(parseQuantity("16k"), 16000);
    assert.equal(parseQuantity(2), 2);
    assert.equal(parseQuantity("1e3"), 1000);
    assert.ok(Number.isNaN(parseQuantity("two")));
    const sleep = (command) => preStopSleepSeconds({ lifecycle: { preStop: { exec: { command } } } });
    assert.equal(sleep(["sleep", "10"]), 10);
    assert.equal(sleep(["/bin/sleep", "5s"]), 5);
    assert.equal(sleep(["sh", "-c", "sleep 7"]), 7);
    assert.equal(sleep(["curl", "x"]), null);
    assert.equal(preStopSleepSeconds({ lifecycle: { preStop: { sleep: { seconds: 3 } } } }), 3);
    assert.equal(preStopSleepSeconds({}), 0);
    const labels = { a: "1", b: "2" };
    assert.ok(labelSelectorMatches({ matchLabels: { a: "1" } }, labels));
    assert.ok(!labelSelectorMatches({ matchLabels: { a: "2" } }, labels));
    assert.ok(labelSelectorMatches({ matchExpressions: [{ key: "b", operator: "In", values: ["2"] }] },
                                   labels));
    assert.ok(!labelSelectorMatches({ matchExpressions: [{ key: "c", operator: "Exists" }] }, labels));
  });

  it("$(VAR) references and their expansion", () => {
    assert.deepEqual(varReferences("--model=$(DIR)/x --y=$$(NOT) $(B)"), ["DIR", "B"]);
    const env = new Map([["DIR", "/m"]]);
    assert.equal(expandVars("--model=$(DIR) $(NOPE) $$(DIR)", env), "--model=/m $(NOPE) $(DIR)");
  });

  it("imageProblem", () => {
    assert.equal(imageProblem("localhost/tandem:0.7.0"), null);
    assert.equal(imageProblem("registry:5000/tandem:1"), null);
    assert.equal(imageProblem(`tandem@sha256:${"a".repeat(64)}`), null);
    assert.match(imageProblem("registry:5000/tandem"), /no tag/);
    assert.match(imageProblem("tandem:latest"), /latest/);
    assert.match(imageProblem("tandem@sha256:abc"), /malformed digest/);
  });

  it("firstDifference names the path", () => {
    assert.equal(firstDifference({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }), null);
    assert.equal(firstDifference({ a: [1, { b: 2 }] }, { a: [1, { b: 3 }] }, "x"), "x.a[1].b: 2 vs 3");
    assert.equal(firstDifference([1], [1, 2], "g"), "g[1]: (absent) vs 2");
  });
});
