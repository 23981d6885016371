// The invariant check of the KV limits that must agree across binaries: 21. a decode node refuses
// a reservation whose lease is longer than its --max-lease-ms, so the lease the router asks for
// (--lease-ms) and the decode node's own default lease (--lease-ms) must not exceed any decode
// node's --max-lease-ms.
// Each check takes (objects, ctx) and returns a list of problems, one sentence each; ctx.helps
// maps a binary's name to parseHelp() of its --help.

import { binaryOf, effectiveFlag } from "./flags.mjs";
import { eachContainer } from "./objects.mjs";

// 21. Every lease asked for fits every decode node's --max-lease-ms (values from the args, else
// the binaries' --help defaults; binaries without the flags are not checked).
export function checkLeaseLimits(objects, ctx) {
  const problems = [];
  const value = (c, flag) => {
    const eff = effectiveFlag(c, flag, ctx.helps[binaryOf(c)]);
    const n = Number(eff?.value);
    return eff && eff.value !== null && eff.value !== "" && Number.isFinite(n)
      ? { n, text: `${flag} ${eff.value} (${eff.source})` } : null;
  };
  const decodes = eachContainer(objects).filter(({ c }) => binaryOf(c) === "tandem-decode");
  const askers = eachContainer(objects).filter(({ c }) =>
    binaryOf(c) === "tandem-router" || binaryOf(c) === "tandem-decode");
  for (const d of decodes) {
    const max = value(d.c, "--max-lease-ms");
    if (!max) continue;
    for (const a of askers) {
      const lease = value(a.c, "--lease-ms");
      if (lease && lease.n > max.n) {
        problems.push(`${a.where}: ${lease.text} exceeds ${d.where === a.where ? "its" : d.where}` +
                      ` ${max.text}: the decode node refuses such reservations`);
      }
    }
  }
  return problems;
}
