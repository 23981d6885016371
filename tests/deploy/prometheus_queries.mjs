// The PromQL in deploy/: the Grafana dashboard's panel queries (with its template variables
// filled in as Grafana would for "All") and the Prometheus rule file's rules.
import fs from "node:fs";
import YAML from "yaml";

// Grafana's variables as they expand for the whole cluster over a short range.
export function expandGrafanaVariables(expr) {
  return expr
    .replaceAll("$__rate_interval", "1m")
    .replaceAll("$__interval", "15s")
    .replaceAll("$__range", "5m")
    .replaceAll('=~"$pool"', '=~".*"');
}

// [{panel, expr}] for every target of every panel (rows' nested panels included).
export function readDashboardQueries(file) {
  const dashboard = JSON.parse(fs.readFileSync(file, "utf8"));
  const out = [];
  const visit = (panels) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) out.push({ panel: p.title, expr: expandGrafanaVariables(t.expr) });
      visit(p.panels);
    }
  };
  visit(dashboard.panels);
  return out;
}

export function readRuleFile(file) {
  const doc = YAML.parse(fs.readFileSync(file, "utf8"));
  const rules = doc.groups.flatMap((g) => g.rules);
  return {
    recording: rules.filter((r) => r.record),
    alerts: rules.filter((r) => r.alert),
  };
}

// `expr` with `bool` after its top-level comparison (outside parentheses, braces, brackets and
// strings), so it returns 0/1 series instead of filtering: `x > 0.9` → `x > bool 0.9`.
export function boolForm(expr) {
  let depth = 0;
  let quote = null;
  for (let i = 0; i < expr.length; ++i) {
    const c = expr[i];
    if (quote) {
      if (c === "\\") ++i;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === '"' || c === "'" || c === "`") quote = c;
    else if ("([{".includes(c)) ++depth;
    else if (")]}".includes(c)) --depth;
    else if (depth === 0) {
      const op = ["==", "!=", ">=", "<=", ">", "<"].find((o) => expr.startsWith(o, i));
      // `=~` and `!~` are matchers, always inside braces; `>` of `->` does not occur in PromQL.
      if (op) return `${expr.slice(0, i + op.length)} bool${expr.slice(i + op.length)}`;
    }
  }
  throw new Error(`no top-level comparison in: ${expr}`);
}
