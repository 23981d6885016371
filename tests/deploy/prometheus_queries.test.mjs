// Unit tests of the PromQL helpers the live test relies on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { boolForm, expandGrafanaVariables } from "./prometheus_queries.mjs";

test("boolForm puts bool after the top-level comparison only", () => {
  assert.equal(boolForm("x > 0.9"), "x > bool 0.9");
  assert.equal(boolForm('max by (a) (m{role="decode", state!="up"}) == 0'),
    'max by (a) (m{role="decode", state!="up"}) == bool 0');
  assert.equal(boolForm('sum(increase(m{reason!="cancelled"}[5m])) > 0'),
    'sum(increase(m{reason!="cancelled"}[5m])) > bool 0');
  assert.equal(boolForm('m{a=">"} >= 2'), 'm{a=">"} >= bool 2');
  assert.throws(() => boolForm("sum(rate(m[1m]))"), /no top-level comparison/);
});

test("Grafana variables expand to the whole cluster", () => {
  assert.equal(expandGrafanaVariables('rate(m{pool=~"$pool"}[$__rate_interval])'),
    'rate(m{pool=~".*"}[1m])');
});
