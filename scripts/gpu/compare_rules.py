"""The rules of the transformers comparison (compare_transformers.py), as pure functions of plain
Python values: no torch, numpy or files, so compare_transformers_test.py checks them anywhere.

Vocabulary: a *run* is tandem-generate's output for one prompt (greedy tokens and, per step, the
chosen token's logprob and its top-K list). A *reference step* is what the reference model (Hugging
Face transformers) gives at one step, teacher-forced on the run's own tokens: its top list and a
lookup of the logprobs of the token ids the comparison needs. Logprobs are natural-log softmax of
the logits (tandem's "raw" logprobs, before any sampling knob).

The checks, per prompt and step, for a tolerance `tol` (nats):
  1. logprobs: |tandem's logprob - the reference's| <= tol for the chosen token and every token of
     tandem's top-K; and over all of them, on every prompt and step, the root mean square of the
     errors <= `rms_tol` (for bf16: noise is spread thin, a bug moves many logprobs);
  2. choice: the reference's best logprob minus its logprob of tandem's token <= 2 tol (if both
     logprobs are each within tol, tandem can only prefer a token the reference ranks at most 2 tol
     lower: a near-tie);
  3. ranking: no token of the reference's top-K whose reference logprob exceeds tandem's K-th
     logprob by more than tol is missing from tandem's top-K;
  4. greedy: tandem's tokens equal the reference's own greedy generation; the first step where
     they differ is accepted only when it is a near-tie by rule 2 (the reference's logprob of its
     own choice minus that of tandem's <= 2 tol), and reported either way. After an accepted
     divergence the sequences are not compared token by token (their contexts differ); rules 1-3
     still hold at every step, since the reference is teacher-forced on tandem's tokens.
Rules 2-4 follow from rule 1 whenever the tokens involved are in tandem's top-K; they are checked
so that a failure names the step and tokens.
"""

import math

# ---- Tolerances (nats of logprob). See scripts/gpu/README.md, "Comparison with transformers". ---
# tandem's cpu backend computes in f32 (f32 copies of the bf16 weights, f32 KV), like transformers
# with the same weights upcast to f32: only summation order and exp/rsqrt/sin/cos rounding differ.
# Measured against fake_hf/reference_forward.py (transformers' modeling code in f64) on the
# reference models' prompts: at most 2.6e-4 (the 700-token prompt). 0.02 leaves ~80x room and is
# still far below what a real bug moves (the models' logits have a standard deviation of 12 over
# the vocabulary).
F32_TOLERANCE = 0.02
# bf16 activations round to 8 significant bits at every layer's inputs and outputs, and these
# random models amplify that: logits of +-60 turn a 2^-9 relative error into tenths of a nat. So
# the bf16 tolerances scale with transformers' own bf16 "noise", measured in the same run: the
# max and RMS of |transformers bf16 - transformers f32| over the same tokens and top-K. Against
# the f32 reference tandem may be BF16_MAX_FACTOR (max) and BF16_RMS_FACTOR (RMS) times as
# noisy; against the bf16 reference the reference's own noise adds (max: + 1x; RMS: in
# quadrature, sqrt(factor^2 + 1)x). Each within a floor and a cap: an error over the cap is a
# bug, not rounding. Measured with fake_hf/reference_forward.py's emulations on the reference
# models' prompts (README, "Comparison with transformers"): transformers' bf16 noise max 0.45-1.03
# / RMS 0.12-0.24; an emulation of tandem's cuda roundings within 1/2.3 of the tolerances (max)
# and 1/1.8 (RMS), e.g. on llama 0.40 / 0.084 against f64 (tolerances 1.49 / 0.26) and 0.66 /
# 0.155 against the bf16 emulation (1.99 / 0.29).
BF16_MAX_FACTOR, BF16_MAX_FLOOR, BF16_MAX_CAP = 3.0, 0.15, 2.5
BF16_RMS_FACTOR, BF16_RMS_FLOOR, BF16_RMS_CAP = 2.0, 0.05, 0.6
# Two tandem runs of the same logits (host sampling with logprobs vs device sampling without):
# they must choose the same tokens except on exact ties.
SAME_LOGITS_TIE = 1e-3


def bf16_tolerances(noise, against_bf16):
    """(max, rms) tolerances for tandem's bf16 backend against transformers in bf16
    (`against_bf16`) or f32, given transformers' bf16-vs-f32 noise {"max", "rms"} on the same
    tokens (None when unknown: the caps)."""
    if noise is None:
        return BF16_MAX_CAP, BF16_RMS_CAP
    t_max = (BF16_MAX_FACTOR + (1.0 if against_bf16 else 0.0)) * noise["max"]
    t_rms = math.sqrt(BF16_RMS_FACTOR ** 2 + (1.0 if against_bf16 else 0.0)) * noise["rms"]
    return (min(BF16_MAX_CAP, max(BF16_MAX_FLOOR, t_max)),
            min(BF16_RMS_CAP, max(BF16_RMS_FLOOR, t_rms)))


def margin_tolerance(tol):
    """How far below the reference's best a token tandem chose may be (rule 2)."""
    return 2.0 * tol


def splitmix64(state):
    """One splitmix64 step: returns (value, next state). Same numbers on every platform."""
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31), state


# Prompt lengths (BOS included): one token; shorter than a KV block (16); just over two blocks;
# ten blocks; longer than tandem-generate's 512-token step budget (chunked prefill). The last
# prompt repeats the first 128 tokens of the 160-token one (a shared prefix: prefix caching).
PROMPT_LENGTHS = (1, 9, 33, 160, 700)
SHARED_PREFIX = (3, 128, 20)  # (prompt index, tokens shared, tokens after)


def make_prompts(vocab_size, special_ids, bos_id=None, seed=15, lengths=PROMPT_LENGTHS,
                 shared_prefix=SHARED_PREFIX):
    """Deterministic token-id prompts of `lengths`, then the shared-prefix prompt (when its
    source prompt is there and long enough). Ordinary tokens are drawn uniformly from
    [0, vocab_size) without `special_ids`; each prompt starts with `bos_id` when given."""
    special = set(special_ids)
    if bos_id is not None:
        special.add(bos_id)
    state = seed

    def draw():
        nonlocal state
        while True:
            value, state = splitmix64(state)
            token = value % vocab_size
            if token not in special:
                return token

    def prompt(length):
        head = [] if bos_id is None else [bos_id]
        return head + [draw() for _ in range(length - len(head))]

    prompts = [prompt(n) for n in lengths]
    if shared_prefix is not None:
        index, shared, after = shared_prefix
        if index < len(prompts) and len(prompts[index]) >= shared:
            prompts.append(prompts[index][:shared] + [draw() for _ in range(after)])
    return prompts


def parse_tandem_output(text, prompts, max_tokens, top_k):
    """Parses tandem-generate's JSON lines for `prompts`. Returns (runs, problems): runs[i] is
    {"tokens": [...], "steps": [{"token", "logprob", "top": [(id, logprob), ...]}, ...]} (steps
    empty when top_k is None), problems a list of what is wrong with the output (empty: valid)."""
    import json

    problems, runs = [], []
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != len(prompts):
        return [], [f"{len(lines)} output lines for {len(prompts)} prompts"]
    for i, line in enumerate(lines):
        where = f"prompt {i}"
        try:
            j = json.loads(line)
        except ValueError as e:
            problems.append(f"{where}: not JSON ({e})")
            runs.append({"tokens": [], "steps": []})
            continue
        if j.get("index") != i:
            problems.append(f"{where}: index {j.get('index')}")
        if j.get("prompt_token_ids") != prompts[i]:
            problems.append(f"{where}: prompt_token_ids differ from the prompt sent")
        if "error" in j:
            problems.append(f"{where}: error {j['error']}")
        elif j.get("finish_reason") != "length":
            problems.append(f"{where}: finish_reason {j.get('finish_reason')!r}, not 'length'")
        tokens = j.get("token_ids") or []
        if len(tokens) != max_tokens:
            problems.append(f"{where}: {len(tokens)} tokens, not {max_tokens}")
        steps = []
        if top_k is not None:
            entries = j.get("logprobs") or []
            if len(entries) != len(tokens):
                problems.append(f"{where}: {len(entries)} logprob entries for {len(tokens)} tokens")
            for s, entry in enumerate(entries[:len(tokens)]):
                step = {"token": entry.get("token_id"), "logprob": entry.get("logprob"),
                        "top": [(t.get("token_id"), t.get("logprob"))
                                for t in entry.get("top_logprobs") or []]}
                problems += _step_problems(f"{where} step {s}", step, tokens[s], top_k)
                steps.append(step)
        runs.append({"tokens": tokens, "steps": steps})
    return runs, problems


def _step_problems(where, step, token, top_k):
    problems = []
    values = [step["logprob"]] + [lp for _, lp in step["top"]]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v <= 1e-6 for v in values):
        return [f"{where}: logprobs not finite and <= 0: {values}"]
    if step["token"] != token:
        problems.append(f"{where}: logprob entry for token {step['token']}, generated {token}")
    if len(step["top"]) != top_k:
        problems.append(f"{where}: {len(step['top'])} top logprobs, not {top_k}")
    tops = [lp for _, lp in step["top"]]
    if any(a < b for a, b in zip(tops, tops[1:])):
        problems.append(f"{where}: top logprobs not in descending order")
    # Greedy: the chosen token is (tied with) the most likely one.
    if tops and step["logprob"] < tops[0] - 1e-6:
        problems.append(f"{where}: greedy chose {token} (logprob {step['logprob']:.4f}) below the "
                        f"top token {step['top'][0][0]} ({tops[0]:.4f})")
    return problems


def ref_step_from_row(row, want_ids, k):
    """A reference step from a full logprob row (a list over the vocabulary): its top-k and the
    logprobs of `want_ids`. compare_transformers.py builds the same from a tensor."""
    order = sorted(range(len(row)), key=lambda t: (-row[t], t))[:k]
    return {"top": [(t, row[t]) for t in order],
            "lp": {t: row[t] for t in set(want_ids) | set(order)}}


def ref_step_from_tandem(step):
    """A reference step made of another tandem run's step (the self-check: no transformers)."""
    lp = dict(step["top"])
    lp.setdefault(step["token"], step["logprob"])
    return {"top": list(step["top"]), "lp": lp}


def compare_run(run, ref_steps, ref_greedy, tol):
    """Compares one prompt's tandem run with the reference teacher-forced on its tokens
    (`ref_steps`, one per step) and the reference's own greedy tokens. Returns a summary dict
    (see the module docstring for the rules); "ok" says whether every rule held. A run without
    "steps" (no logprobs) is checked on its tokens alone (rules 2 and 4)."""
    mtol = margin_tolerance(tol)
    out = {"max_abs_error": 0.0, "sum_sq": 0.0, "count": 0, "worst": None,
           "choice_failures": [], "missing": [], "unknown_ids": 0, "divergence": None,
           "near_ties": 0}
    for s, (token, ref) in enumerate(zip(run["tokens"], ref_steps)):
        # A run without logprobs (device sampling) has tokens only: rules 2 and 4.
        step = run["steps"][s] if s < len(run["steps"]) else {"token": token, "top": []}
        pairs = [(token, step["logprob"])] + list(step["top"]) if "logprob" in step else []
        for token_id, got in pairs:
            want = ref["lp"].get(token_id)
            if want is None:
                out["unknown_ids"] += 1
                continue
            err = abs(got - want)
            out["sum_sq"] += err * err
            out["count"] += 1
            if err > out["max_abs_error"] or out["worst"] is None:
                out["max_abs_error"] = max(out["max_abs_error"], err)
                out["worst"] = {"step": s, "token": token_id, "tandem": got, "reference": want}
        best_id, best = ref["top"][0]
        mine = ref["lp"].get(step["token"])
        if mine is None:
            out["choice_failures"].append({"step": s, "tandem_token": step["token"],
                                           "reference_token": best_id, "margin": None})
        elif step["token"] != best_id:
            if best - mine <= mtol:
                out["near_ties"] += 1
            else:
                out["choice_failures"].append({"step": s, "tandem_token": step["token"],
                                               "reference_token": best_id, "margin": best - mine})
        if step["top"]:
            kth = step["top"][-1][1]
            have = {t for t, _ in step["top"]}
            for ref_token, want in ref["top"][:len(step["top"])]:
                if ref_token not in have and want > kth + tol:
                    out["missing"].append({"step": s, "token": ref_token, "reference": want,
                                           "tandem_kth": kth})
    out["divergence"] = first_divergence(run["tokens"], ref_greedy, ref_steps, mtol)
    out["steps_mismatch"] = len(ref_steps) != len(run["tokens"])
    out["ok"] = (out["max_abs_error"] <= tol and not out["choice_failures"] and not out["missing"]
                 and not out["steps_mismatch"] and not out["unknown_ids"]
                 and (out["divergence"] is None or out["divergence"]["accepted"]))
    return out


def first_divergence(tokens, ref_tokens, ref_steps, mtol):
    """The first step where `tokens` and `ref_tokens` differ, or None. `ref_steps[step]` (the
    reference at that step, whose context both sequences share) decides whether it is an
    accepted near-tie: its logprob of its own token minus that of tandem's <= mtol."""
    for s, (a, b) in enumerate(zip(tokens, ref_tokens)):
        if a == b:
            continue
        margin = None
        if s < len(ref_steps):
            lp = ref_steps[s]["lp"]
            top_id, top_lp = ref_steps[s]["top"][0]
            ref_lp = lp.get(b, top_lp if b == top_id else None)
            if ref_lp is not None and a in lp:
                margin = ref_lp - lp[a]
        return {"step": s, "tandem_token": a, "reference_token": b, "margin": margin,
                "accepted": margin is not None and margin <= mtol}
    if len(tokens) != len(ref_tokens):
        return {"step": min(len(tokens), len(ref_tokens)), "tandem_token": None,
                "reference_token": None, "margin": None, "accepted": False}
    return None


def compare_backend(runs, refs, ref_greedys, tol, rms_tol=None):
    """compare_run over every prompt, and the RMS of all errors against `rms_tol` (default
    `tol`). Returns {"pass", "tolerance", "rms_tolerance", "margin_tolerance",
    "max_abs_logprob_error", "rms_logprob_error", "compared", "worst", "first_divergence",
    "near_ties", "failures", "prompts"}."""
    rms_tol = tol if rms_tol is None else rms_tol
    result = {"tolerance": tol, "rms_tolerance": rms_tol, "margin_tolerance": margin_tolerance(tol),
              "max_abs_logprob_error": 0.0, "rms_logprob_error": 0.0, "compared": 0,
              "worst": None, "first_divergence": None, "near_ties": 0, "failures": [],
              "prompts": []}
    sum_sq = 0.0
    for i, (run, ref, greedy) in enumerate(zip(runs, refs, ref_greedys)):
        r = compare_run(run, ref, greedy, tol)
        sum_sq += r["sum_sq"]
        result["compared"] += r["count"]
        if r["steps_mismatch"]:
            result["failures"].append(f"prompt {i}: {len(ref)} reference steps for "
                                      f"{len(run['tokens'])} tokens")
        if r["unknown_ids"]:
            result["failures"].append(f"prompt {i}: {r['unknown_ids']} of tandem's token ids have "
                                      "no reference logprob")
        result["prompts"].append({
            "max_abs_error": r["max_abs_error"], "divergence": r["divergence"],
            "near_ties": r["near_ties"], "ok": r["ok"]})
        result["near_ties"] += r["near_ties"]
        if r["worst"] is not None and (result["worst"] is None or
                                       r["max_abs_error"] > result["max_abs_logprob_error"]):
            result["max_abs_logprob_error"] = r["max_abs_error"]
            result["worst"] = dict(r["worst"], prompt=i)
        d = r["divergence"]
        if d is not None and result["first_divergence"] is None:
            result["first_divergence"] = dict(d, prompt=i)
        if r["max_abs_error"] > tol:
            w = r["worst"]
            result["failures"].append(
                f"prompt {i} step {w['step']}: token {w['token']} logprob {w['tandem']:.4f}, "
                f"reference {w['reference']:.4f} (|error| {r['max_abs_error']:.4f} > {tol:.4f})")
        for f in r["choice_failures"]:
            margin = "not in the reference's list" if f["margin"] is None else \
                f"{f['margin']:.4f} below its best"
            result["failures"].append(
                f"prompt {i} step {f['step']}: tandem chose {f['tandem_token']}, the reference "
                f"prefers {f['reference_token']} (tandem's token {margin}; near-tie limit "
                f"{margin_tolerance(tol):.4f})")
        for m in r["missing"][:3]:
            result["failures"].append(
                f"prompt {i} step {m['step']}: the reference's top token {m['token']} "
                f"(logprob {m['reference']:.4f}) is missing from tandem's top list (K-th "
                f"{m['tandem_kth']:.4f})")
        if d is not None and not d["accepted"]:
            result["failures"].append(
                f"prompt {i}: greedy tokens diverge at step {d['step']} (tandem "
                f"{d['tandem_token']}, reference {d['reference_token']}, reference margin "
                f"{d['margin']}) beyond the near-tie limit {margin_tolerance(tol):.4f}")
    if len(runs) != len(refs) or not runs:
        result["failures"].append(f"{len(runs)} runs for {len(refs)} reference prompts")
    if result["compared"]:
        result["rms_logprob_error"] = math.sqrt(sum_sq / result["compared"])
    if result["rms_logprob_error"] > rms_tol:
        result["failures"].append(
            f"RMS logprob error {result['rms_logprob_error']:.4f} over {result['compared']} "
            f"logprobs > {rms_tol:.4f}")
    result["pass"] = not result["failures"]
    return result


def reference_noise(runs, refs_a, refs_b):
    """{"max", "rms"} of |a - b| between two references' logprobs of each run's chosen and top-K
    tokens (transformers' bf16 run against its f32 run on the same tokens); None if none."""
    errs = []
    for run, steps_a, steps_b in zip(runs, refs_a, refs_b):
        for step, a, b in zip(run["steps"], steps_a, steps_b):
            for token, _ in [(step["token"], None)] + list(step["top"]):
                if token in a["lp"] and token in b["lp"]:
                    errs.append(abs(a["lp"][token] - b["lp"][token]))
    if not errs:
        return None
    return {"max": max(errs), "rms": math.sqrt(sum(e * e for e in errs) / len(errs))}


def compare_token_runs(runs, other_runs, margin_runs, tie=SAME_LOGITS_TIE):
    """Two tandem runs that see the same logits must choose the same tokens; a difference is
    accepted only on a near-tie (<= `tie`) in `margin_runs`' top-2 logprobs at that step.
    Returns {"pass", "identical", "first_divergence", "failures"}."""
    out = {"identical": True, "first_divergence": None, "failures": []}
    if len(runs) != len(other_runs):
        out["failures"].append(f"{len(other_runs)} runs for {len(runs)} prompts")
    for i, (a, b, m) in enumerate(zip(runs, other_runs, margin_runs)):
        for s, (x, y) in enumerate(zip(a["tokens"], b["tokens"])):
            if x == y:
                continue
            out["identical"] = False
            top = m["steps"][s]["top"] if s < len(m["steps"]) else []
            margin = top[0][1] - top[1][1] if len(top) >= 2 else None
            d = {"prompt": i, "step": s, "tokens": [x, y], "margin": margin,
                 "accepted": margin is not None and margin <= tie}
            if out["first_divergence"] is None:
                out["first_divergence"] = d
            if not d["accepted"]:
                out["failures"].append(f"prompt {i} step {s}: tokens {x} vs {y} (top-2 margin "
                                       f"{margin}, ties up to {tie})")
            break
        if len(a["tokens"]) != len(b["tokens"]):
            out["failures"].append(f"prompt {i}: {len(a['tokens'])} vs {len(b['tokens'])} tokens")
    out["pass"] = not out["failures"]
    return out


def hf_config_mismatches(config_json, loaded):
    """What transformers read (`loaded`: field -> value, None when it has no such field) that
    differs from config.json, as messages: a field transformers silently defaulted would make the
    comparison test the wrong model."""
    problems = []
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta",
                "tie_word_embeddings"):
        want, got = config_json.get(key), loaded.get(key)
        if want is None or got is None:
            continue
        if isinstance(want, float) or isinstance(got, float):
            same = math.isclose(float(want), float(got), rel_tol=1e-9)
        else:
            same = want == got
        if not same:
            problems.append(f"{key}: config.json {want}, transformers {got}")
    want_hd = config_json.get("head_dim")
    if want_hd is not None and loaded.get("head_dim") not in (None, want_hd):
        problems.append(f"head_dim: config.json {want_hd}, transformers {loaded['head_dim']}")
    scaling = config_json.get("rope_scaling") or {}
    want_type = scaling.get("rope_type", scaling.get("type", "default"))
    got_type = loaded.get("rope_type") or "default"
    if want_type != got_type:
        problems.append(f"rope type: config.json {want_type}, transformers {got_type}")
    for key in ("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings"):
        want, got = scaling.get(key), (loaded.get("rope_scaling") or {}).get(key)
        if want is not None and got is not None and not math.isclose(float(want), float(got)):
            problems.append(f"rope_scaling.{key}: config.json {want}, transformers {got}")
    return problems
