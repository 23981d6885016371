#!/usr/bin/env python3
"""Unit tests of the transformers comparison's rules (compare_rules.py), its report
(compare_transformers.py), the tokenizer cut (small_tokenizer.py) and the fake torch the
end-to-end test runs on (fake_hf/). Plain python3: no torch, numpy or GPU.

  python3 scripts/gpu/compare_transformers_test.py        (ctest: compare_transformers_unit)
"""

import json
import math
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts (or in a pack)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_rules as rules  # noqa: E402
import compare_transformers as ct  # noqa: E402
import small_tokenizer  # noqa: E402


def run_of(tokens, tops):
    """A tandem run: tokens and, per step, the top list (the chosen token's logprob from it)."""
    steps = []
    for token, top in zip(tokens, tops):
        lp = dict(top)[token]
        steps.append({"token": token, "logprob": lp, "top": list(top)})
    return {"tokens": list(tokens), "steps": steps}


def ref_of(rows, k=4):
    """Reference steps from full logprob rows."""
    return [rules.ref_step_from_row(row, range(len(row)), k) for row in rows]


def log_softmax(logits):
    top = max(logits)
    lse = top + math.log(sum(math.exp(v - top) for v in logits))
    return [v - lse for v in logits]


def top_of(row, k):
    order = sorted(range(len(row)), key=lambda t: (-row[t], t))[:k]
    return [(t, row[t]) for t in order]


ROWS = [log_softmax([5.0, 1.0, 0.0, -1.0, 2.0]), log_softmax([0.0, 4.0, 1.0, 3.0, 0.5]),
        log_softmax([1.0, 0.0, 6.0, 2.5, 0.0])]
GREEDY = [0, 1, 2]


def exact_run(rows=ROWS, k=3, shift=0.0):
    tokens = [max(range(len(r)), key=r.__getitem__) for r in rows]
    return run_of(tokens, [[(t, v + shift) for t, v in top_of(r, k)] for r in rows])


class PromptsTest(unittest.TestCase):
    def test_deterministic_lengths_bos_and_no_special_tokens(self):
        a = rules.make_prompts(1024, [1023], bos_id=1022)
        self.assertEqual(a, rules.make_prompts(1024, [1023], bos_id=1022))
        self.assertEqual([len(p) for p in a], list(rules.PROMPT_LENGTHS) + [148])
        for p in a:
            self.assertEqual(p[0], 1022)
            self.assertTrue(all(0 <= t < 1022 for t in p[1:]))
        self.assertEqual(a[5][:128], a[3][:128])
        self.assertNotEqual(a[5][128:], a[3][128:148])
        self.assertNotEqual(a[1], rules.make_prompts(1024, [1023], bos_id=1022, seed=16)[1])
        # A fixed splitmix64 stream (0xE220A8397B1DCDAF is its published first value for seed
        # 0): the prompts must not change between runs, Python versions or platforms.
        self.assertEqual(rules.splitmix64(0)[0], 0xE220A8397B1DCDAF)
        self.assertEqual(rules.make_prompts(1000, [], lengths=[4], shared_prefix=None),
                         [[941, 496, 931, 471]])

    def test_short_lengths_drop_the_shared_prefix_prompt(self):
        self.assertEqual([len(p) for p in rules.make_prompts(64, [], lengths=[1, 5])], [1, 5])


class ParseTest(unittest.TestCase):
    def line(self, i, prompt, tokens, k=2, **over):
        j = {"index": i, "prompt_token_ids": prompt, "token_ids": tokens,
             "finish_reason": "length",
             "logprobs": [{"token_id": t, "logprob": -0.1,
                           "top_logprobs": [{"token_id": t, "logprob": -0.1}] +
                           [{"token_id": t + 1 + j, "logprob": -2.0 - j} for j in range(k - 1)]}
                          for t in tokens]}
        j.update(over)
        return json.dumps(j)

    def test_valid_output(self):
        text = self.line(0, [1, 2], [5, 6]) + "\n" + self.line(1, [3], [7, 8]) + "\n"
        runs, problems = rules.parse_tandem_output(text, [[1, 2], [3]], 2, 2)
        self.assertEqual(problems, [])
        self.assertEqual(runs[1]["tokens"], [7, 8])
        self.assertEqual(runs[0]["steps"][1]["top"], [(6, -0.1), (7, -2.0)])

    def test_each_problem_is_named(self):
        prompts = [[1, 2]]
        cases = {
            "0 output lines": "",
            "prompt_token_ids differ": self.line(0, [9], [5, 6]),
            "finish_reason 'stop'": self.line(0, [1, 2], [5, 6], finish_reason="stop"),
            "error boom": self.line(0, [1, 2], [5, 6], error="boom"),
            "1 tokens, not 2": self.line(0, [1, 2], [5]),
            "3 top logprobs, not 2": self.line(0, [1, 2], [5, 6], k=3),
            "index 4": self.line(4, [1, 2], [5, 6]),
        }
        for want, text in cases.items():
            _, problems = rules.parse_tandem_output(text, prompts, 2, 2)
            self.assertTrue(any(want in p for p in problems), (want, problems))
        bad = json.loads(self.line(0, [1, 2], [5, 6]))
        bad["logprobs"][1]["logprob"] = -3.0  # greedy must be the top token
        _, problems = rules.parse_tandem_output(json.dumps(bad), prompts, 2, 2)
        self.assertTrue(any("greedy chose 6" in p for p in problems), problems)
        bad["logprobs"][1]["top_logprobs"][0]["logprob"] = float("nan")
        _, problems = rules.parse_tandem_output(json.dumps(bad), prompts, 2, 2)
        self.assertTrue(any("not finite" in p for p in problems), problems)


class CompareTest(unittest.TestCase):
    def test_identical_passes(self):
        r = rules.compare_backend([exact_run()], [ref_of(ROWS)], [GREEDY], 0.1)
        self.assertTrue(r["pass"], r["failures"])
        self.assertLess(r["max_abs_logprob_error"], 1e-12)
        self.assertIsNone(r["first_divergence"])

    def test_logprob_error_over_tolerance_fails_and_names_the_step(self):
        r = rules.compare_backend([exact_run(shift=0.3)], [ref_of(ROWS)], [GREEDY], 0.2)
        self.assertFalse(r["pass"])
        self.assertAlmostEqual(r["max_abs_logprob_error"], 0.3)
        self.assertIn("|error| 0.3000 > 0.2000", r["failures"][0])
        self.assertTrue(rules.compare_backend([exact_run(shift=0.3)], [ref_of(ROWS)], [GREEDY],
                                              0.31)["pass"])

    def near_tie_rows(self, margin):
        return [ROWS[0], log_softmax([0.0, 4.0, 1.0, 4.0 - margin, 0.5]), ROWS[2]]

    def test_divergence_on_a_near_tie_is_accepted_and_reported(self):
        rows = self.near_tie_rows(0.05)
        lp = rows[1]
        # tandem picks token 3 at step 1 (its own logprobs a little off), the reference 1.
        got = run_of([0, 3, 2], [top_of(ROWS[0], 3), [(3, lp[3] + 0.04), (1, lp[1] - 0.04),
                                                      (2, lp[2])], top_of(ROWS[2], 3)])
        r = rules.compare_backend([got], [ref_of(rows)], [[0, 1, 2]], 0.1)
        self.assertTrue(r["pass"], r["failures"])
        d = r["first_divergence"]
        self.assertEqual((d["prompt"], d["step"], d["tandem_token"], d["reference_token"]),
                         (0, 1, 3, 1))
        self.assertTrue(d["accepted"])
        self.assertAlmostEqual(d["margin"], 0.05)
        self.assertEqual(r["near_ties"], 1)

    def test_divergence_beyond_the_near_tie_limit_fails(self):
        rows = self.near_tie_rows(0.5)
        lp = rows[1]
        got = run_of([0, 3, 2], [top_of(ROWS[0], 3), [(3, lp[3] + 0.5), (1, lp[1] + 0.05),
                                                      (2, lp[2])], top_of(ROWS[2], 3)])
        r = rules.compare_backend([got], [ref_of(rows)], [[0, 1, 2]], 0.2)
        self.assertFalse(r["pass"])
        self.assertFalse(r["first_divergence"]["accepted"])
        self.assertTrue(any("diverge at step 1" in f for f in r["failures"]), r["failures"])
        self.assertTrue(any("tandem chose 3, the reference prefers 1" in f
                            for f in r["failures"]), r["failures"])

    def test_a_token_missing_from_tandems_top_list_fails(self):
        # tandem's top-3 at step 0 leaves out token 4 (reference logprob well above its K-th).
        top = top_of(ROWS[0], 4)
        got = exact_run()
        got["steps"][0]["top"] = [top[0], top[2], top[3]]
        r = rules.compare_backend([got], [ref_of(ROWS)], [GREEDY], 0.1)
        self.assertFalse(r["pass"])
        self.assertTrue(any("top token 4" in f and "missing" in f for f in r["failures"]),
                        r["failures"])

    def test_rms_over_tolerance_fails_even_when_every_error_is_within_the_max(self):
        r = rules.compare_backend([exact_run(shift=0.1)], [ref_of(ROWS)], [GREEDY], 0.2, 0.05)
        self.assertFalse(r["pass"])
        self.assertAlmostEqual(r["rms_logprob_error"], 0.1)
        self.assertEqual(r["compared"], 12)  # 3 steps x (chosen + top-3)
        self.assertIn("RMS logprob error 0.1000 over 12 logprobs > 0.0500", r["failures"][0])
        self.assertTrue(rules.compare_backend([exact_run(shift=0.1)], [ref_of(ROWS)], [GREEDY],
                                              0.2, 0.11)["pass"])

    def test_tolerances(self):
        for bf16 in (False, True):
            self.assertEqual(rules.bf16_tolerances(None, bf16),
                             (rules.BF16_MAX_CAP, rules.BF16_RMS_CAP))
            self.assertEqual(rules.bf16_tolerances({"max": 0.001, "rms": 0.0001}, bf16),
                             (rules.BF16_MAX_FLOOR, rules.BF16_RMS_FLOOR))
            self.assertEqual(rules.bf16_tolerances({"max": 50.0, "rms": 9.0}, bf16),
                             (rules.BF16_MAX_CAP, rules.BF16_RMS_CAP))
        # Against f32: factor x the reference's noise; against bf16 its own noise adds.
        t_max, t_rms = rules.bf16_tolerances({"max": 0.3, "rms": 0.1}, False)
        self.assertAlmostEqual(t_max, rules.BF16_MAX_FACTOR * 0.3)
        self.assertAlmostEqual(t_rms, rules.BF16_RMS_FACTOR * 0.1)
        t_max, t_rms = rules.bf16_tolerances({"max": 0.3, "rms": 0.1}, True)
        self.assertAlmostEqual(t_max, (rules.BF16_MAX_FACTOR + 1) * 0.3)
        self.assertAlmostEqual(t_rms, math.sqrt(rules.BF16_RMS_FACTOR ** 2 + 1) * 0.1)
        self.assertEqual(rules.margin_tolerance(0.25), 0.5)

    def test_reference_noise(self):
        shifted = [[v + (0.07 if t == 1 else 0.0) for t, v in enumerate(row)] for row in ROWS]
        e = rules.reference_noise([exact_run()], [ref_of(ROWS)], [ref_of(shifted)])
        self.assertAlmostEqual(e["max"], 0.07)
        # token 1 is 3 of the 12 compared logprobs: top-3 at step 0, chosen and top-3 at step 1
        self.assertAlmostEqual(e["rms"], 0.07 * math.sqrt(3 / 12))
        self.assertIsNone(rules.reference_noise([], [], []))

    def test_token_ids_without_a_reference_logprob_fail(self):
        refs = ref_of(ROWS)
        del refs[1]["lp"][3]
        r = rules.compare_backend([exact_run()], [refs], [GREEDY], 0.1)
        self.assertFalse(r["pass"])
        self.assertIn("no reference logprob", r["failures"][0])

    def test_same_logits_runs(self):
        a = exact_run()
        b = {"tokens": list(a["tokens"]), "steps": []}
        self.assertTrue(rules.compare_token_runs([a], [b], [a])["identical"])
        b["tokens"][2] = 3
        r = rules.compare_token_runs([a], [b], [a])
        self.assertFalse(r["pass"])
        self.assertEqual(r["first_divergence"]["step"], 2)
        tie = run_of([0, 1, 2], [top_of(ROWS[0], 2), top_of(ROWS[1], 2), [(2, -0.7), (3, -0.7)]])
        self.assertTrue(rules.compare_token_runs([tie], [b], [tie])["pass"])


class ConfigTest(unittest.TestCase):
    def test_mismatches(self):
        cfg = {"hidden_size": 256, "rope_theta": 500000.0, "head_dim": 64,
               "rope_scaling": {"rope_type": "llama3", "factor": 32.0}}
        good = {"hidden_size": 256, "rope_theta": 500000, "head_dim": 64, "rope_type": "llama3",
                "rope_scaling": {"factor": 32.0}}
        self.assertEqual(rules.hf_config_mismatches(cfg, good), [])
        bad = dict(good, rope_theta=10000.0, rope_type="default", head_dim=32,
                   rope_scaling={"factor": 8.0})
        problems = " ".join(rules.hf_config_mismatches(cfg, bad))
        for want in ("rope_theta", "rope type", "head_dim", "rope_scaling.factor"):
            self.assertIn(want, problems)
        self.assertEqual(rules.hf_config_mismatches({"rope_scaling": None}, {}), [])


class ReportTest(unittest.TestCase):
    def report(self, passed=True):
        vs = rules.compare_backend([exact_run()], [ref_of(ROWS)], [GREEDY], 0.1)
        return {"mode": "transformers", "pass": passed, "exit_code": 0, "settings": {},
                "environment": {}, "error": None,
                "models": [{"name": "m", "dir": "/m", "pass": True,
                            "backends": {"cuda": {"pass": True, "vs": {"hf_bf16": vs}}}}]}

    def test_valid_report_and_table(self):
        r = self.report()
        self.assertEqual(ct.report_problems(json.loads(json.dumps(r))), [])
        t = ct.table(r)
        self.assertIn("hf_bf16", t)
        self.assertIn("PASS", t)

    def test_inconsistent_pass_is_caught(self):
        self.assertTrue(ct.report_problems(self.report(passed=False)))
        r = self.report()
        del r["models"][0]["backends"]["cuda"]["vs"]["hf_bf16"]["tolerance"]
        self.assertTrue(any("no tolerance" in p for p in ct.report_problems(r)))


class SmallTokenizerTest(unittest.TestCase):
    def test_cut_keeps_bytes_and_renumbers_specials(self):
        alphabet = small_tokenizer._bytes_to_unicode()
        vocab = {c: i for i, c in enumerate(alphabet)}
        vocab.update({"ab": 256, "abc": 257, "zz": 258})
        tok = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "ab c", "z z"]},
               "added_tokens": [{"id": 300, "content": "<s>"}, {"id": 301, "content": "</s>"},
                                {"id": 302, "content": "<pad>"}],
               "post_processor": {"type": "TemplateProcessing",
                                  "special_tokens": {"<s>": {"id": "<s>", "ids": [300]}}}}
        cfg = {"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": "x",
               "added_tokens_decoder": {"300": {"content": "<s>"}, "302": {"content": "<pad>"}}}
        out, out_cfg = small_tokenizer.cut_tokenizer(tok, cfg, 258)
        self.assertEqual(len(out["model"]["vocab"]), 258)
        self.assertEqual(out["model"]["merges"], ["a b", "ab c"])
        self.assertEqual([(t["content"], t["id"]) for t in out["added_tokens"]],
                         [("<s>", 258), ("</s>", 259)])
        self.assertEqual(out["post_processor"]["special_tokens"]["<s>"]["ids"], [258])
        self.assertNotIn("chat_template", out_cfg)
        self.assertEqual(out_cfg["added_tokens_decoder"], {"258": {"content": "<s>"}})
        with self.assertRaises(ValueError):
            small_tokenizer.cut_tokenizer(tok, cfg, 200)  # bytes would be lost


class FakeTorchTest(unittest.TestCase):
    """The stand-ins the end-to-end test runs compare_transformers.py on."""

    def setUp(self):
        sys.path.insert(0, os.path.join(HERE, "fake_hf"))
        import torch  # the fake one: fake_hf is first on the path
        self.torch = torch
        self.assertTrue(getattr(torch, "__fake__", False))

    def tearDown(self):
        sys.path.remove(os.path.join(HERE, "fake_hf"))
        for name in ("torch", "transformers", "reference_forward"):
            sys.modules.pop(name, None)

    def test_ops_have_torchs_results(self):
        torch = self.torch
        h = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
        w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        logits = h.float() @ w.float().t()
        self.assertEqual(logits.tolist(), [[1.0, 2.0, 3.0], [0.5, -1.0, -0.5]])
        lp = torch.log_softmax(logits.double(), dim=-1)
        self.assertAlmostEqual(sum(math.exp(v) for v in lp.tolist()[0]), 1.0)
        values, indices = torch.topk(lp, 2, dim=-1)
        self.assertEqual(indices.tolist(), [[2, 1], [0, 2]])
        self.assertEqual(lp[1, [2, 0]].tolist(), [lp.tolist()[1][2], lp.tolist()[1][0]])
        self.assertEqual(int(torch.argmax(lp[0])), 2)
        self.assertEqual(lp.shape, (2, 3))

    def test_bf16_rounding(self):
        from reference_forward import round_bf16
        self.assertEqual(round_bf16([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -9, -3.0e-3]),
                         [1.0, 1.0, 1.0078125, -0.0030059814453125])


if __name__ == "__main__":
    unittest.main()
