#!/usr/bin/env python3
"""tandem against Hugging Face transformers, on a GPU machine (scripts/gpu/README.md, "Comparison
with transformers").

For each model directory (random-weight models from make_reference_models.sh): makes a few
deterministic token-id prompts, runs tandem-generate greedy (N tokens, top-K logprobs) on the cuda
backend (CUDA graphs, then eager), on the cpu backend, and on the cuda backend without logprobs
(device sampling); loads the same directory with transformers in bf16 and in f32 on the GPU, runs
greedy generation, and teacher-forced on each tandem run's tokens computes log_softmax at every
step; then checks each tandem run against both with the rules of compare_rules.py. Writes one JSON
file (--out) and prints a table.

Exit status: 0 every model and backend passed; 1 a mismatch (or tandem failed); 2 torch,
transformers or a GPU is missing (the JSON says which).

--self-check needs neither torch nor a GPU: it runs tandem-generate on the cpu backend twice (top-K
and top-20 logprobs, different thread counts) and checks the first against the second with the
same rules and f32 tolerance, checks that --backend cuda either works or fails cleanly, and writes
and re-reads the JSON. Exit 0 or 1.

Usage: compare_transformers.py [--tandem-generate PATH] [--out FILE] [--self-check]
           [--max-tokens N] [--top-k K] [--time-budget S] [--runs A,B] [--prompt-lengths A,B]
           [--backend-override cpu] MODEL_DIR... (a folder of model folders counts as each)
Defaults: --tandem-generate $TANDEM_BINARY_DIR/bin/tandem-generate (else build/bin/), --out
$TANDEM_RESULTS_DIR/compare_transformers.json (else ./), 32 tokens, top-5, 480 s, every run.
"""

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts (or in a pack)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_rules as rules  # noqa: E402

# tandem runs: name -> (backend, extra flags, with logprobs).
RUNS = {
    "cuda": ("cuda", [], True),
    "cuda_eager": ("cuda", ["--no-cuda-graphs"], True),
    "cpu": ("cpu", [], True),
    "cuda_device_sampling": ("cuda", [], False),
}
HF_CLASSES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
REF_TOP = 10  # the reference's top list kept per step (>= --top-k)


def model_dirs(paths):
    dirs = []
    for p in paths:
        if os.path.isfile(os.path.join(p, "config.json")):
            dirs.append(p)
        elif os.path.isdir(p):
            dirs += sorted(os.path.join(p, d) for d in os.listdir(p)
                           if os.path.isfile(os.path.join(p, d, "config.json")))
    return dirs


def model_name(d):
    return os.path.basename(os.path.normpath(d))


def read_config(d):
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def prompts_for(config, args):
    eos = config.get("eos_token_id")
    eos = eos if isinstance(eos, list) else [] if eos is None else [eos]
    return rules.make_prompts(config["vocab_size"], eos, config.get("bos_token_id"),
                              lengths=args.prompt_lengths)


def run_tandem(binary, model_dir, prompts_file, prompts, args, backend, extra, top_k):
    """Runs tandem-generate; returns a dict with "runs" (parsed) or "error", and "seconds"."""
    backend = args.backend_override or backend
    cmd = [binary, "--model", model_dir, "--prompts-file", prompts_file, "--backend", backend,
           "--max-tokens", str(args.max_tokens), "--temperature", "0", "--ignore-eos"]
    if top_k is not None:
        cmd += ["--logprobs", str(top_k)]
    if backend == "cuda":
        cmd += ["--max-model-len", "2048"]
    else:
        cmd += ["--threads", str(args.threads)]
    cmd += extra
    start = time.monotonic()
    limit = min(args.tandem_timeout, args.deadline - start)
    if limit < 1:
        return {"error": "not run: out of the --time-budget", "command": cmd}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {limit:.0f} s", "command": cmd}
    out = {"seconds": round(time.monotonic() - start, 2), "command": cmd}
    if p.returncode != 0:
        out["error"] = f"exit {p.returncode}: {p.stderr.strip()[-2000:]}"
        out["exit_code"] = p.returncode
        return out
    runs, problems = rules.parse_tandem_output(p.stdout, prompts, args.max_tokens, top_k)
    if problems:
        out["error"] = "invalid output: " + "; ".join(problems[:5])
    out["runs"] = runs
    return out


# ---- transformers (imported only here: the rest runs without torch). ---------------------------
class Missing(Exception):
    """torch, transformers or a GPU is not there (exit 2)."""


def import_torch():
    try:
        import torch
        import transformers
    except ImportError as e:
        raise Missing(f"cannot import torch/transformers ({e}); install them on the GPU machine")
    if not torch.cuda.is_available():
        raise Missing(f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False)")
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 reference must be f32
    torch.backends.cudnn.allow_tf32 = False
    return torch, transformers


def hf_version(transformers):
    parts = []
    for piece in transformers.__version__.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def load_hf(torch, transformers, model_dir, dtype):
    """The model in `dtype` on the GPU, checked to be the class config.json names (else
    RuntimeError), and a list of warnings: tensors transformers did not load and config fields it
    read differently from config.json. Those make it a different model, which the comparison
    itself then shows; the warnings say why."""
    config = read_config(model_dir)
    arch = (config.get("architectures") or ["?"])[0]
    if arch not in HF_CLASSES:
        raise RuntimeError(f"{model_dir}: architecture {arch} is not one of {HF_CLASSES}")
    kwargs = {"local_files_only": True, "attn_implementation": "eager",
              "output_loading_info": True}
    kwargs["dtype" if hf_version(transformers) >= (4, 56) else "torch_dtype"] = dtype
    loaded = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
    model, info = loaded if isinstance(loaded, tuple) else (loaded, None)
    model = model.cuda().eval()
    expected = getattr(transformers, arch)
    if not isinstance(model, expected):
        raise RuntimeError(f"{model_dir}: transformers made {type(model).__name__}, not {arch}")
    if next(model.parameters()).dtype != dtype:
        raise RuntimeError(f"{model_dir}: transformers loaded {next(model.parameters()).dtype}, "
                           f"not {dtype}")
    warnings = []
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        value = info.get(key) if isinstance(info, dict) else getattr(info, key, None)
        names = sorted(str(x) for x in value or ())
        if key == "missing_keys" and config.get("tie_word_embeddings"):
            names = [n for n in names if n != "lm_head.weight"]  # tied: checked below
        if names:
            warnings.append(f"{key}: {names[:8]}")
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if not isinstance(rope, dict):
        rope = {}
    read = {k: getattr(cfg, k, None) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size", "rms_norm_eps", "tie_word_embeddings", "head_dim")}
    read["rope_theta"] = rope.get("rope_theta", getattr(cfg, "rope_theta", None))
    read["rope_type"] = rope.get("rope_type", rope.get("type"))
    read["rope_scaling"] = rope
    warnings += rules.hf_config_mismatches(config, read)
    if config.get("tie_word_embeddings") and (model.get_output_embeddings().weight.data_ptr() !=
                                              model.get_input_embeddings().weight.data_ptr()):
        warnings.append("tie_word_embeddings: transformers did not tie the LM head")
    return model, warnings


def hf_logprobs(torch, model, token_ids, first):
    """log_softmax (f64) of the next-token logits at positions first.. of `token_ids`. The LM head
    runs in f32 on the model's final (normed) hidden state: bf16 logits of magnitude 32-64 are
    quantized in steps of 0.25, which alone would exceed the tolerance, and tandem's logits are f32
    (the GEMM accumulates and writes f32)."""
    base = getattr(model, model.base_model_prefix)
    ids = torch.tensor([token_ids], device="cuda")
    with torch.inference_mode():
        hidden = base(input_ids=ids, use_cache=False).last_hidden_state[0, first:]
        head = model.get_output_embeddings()
        logits = hidden.float() @ head.weight.float().t()
        if getattr(head, "bias", None) is not None:
            logits = logits + head.bias.float()
        return torch.log_softmax(logits.double(), dim=-1)


def hf_greedy(torch, model, prompt, n):
    seq = list(prompt)
    for _ in range(n):
        row = hf_logprobs(torch, model, seq, len(seq) - 1)[0]
        seq.append(int(torch.argmax(row)))
    return seq[len(prompt):]


def hf_reference(torch, model, prompts, runs_by_name, n):
    """The reference's greedy tokens per prompt, and per tandem run name its teacher-forced
    reference steps per prompt."""
    greedy = [hf_greedy(torch, model, p, n) for p in prompts]
    steps = {}
    for name, runs in runs_by_name.items():
        steps[name] = []
        for p, run, g in zip(prompts, runs, greedy):
            lp = hf_logprobs(torch, model, p + run["tokens"][:-1], len(p) - 1)
            top_v, top_i = torch.topk(lp, min(REF_TOP, lp.shape[-1]), dim=-1)
            top_v, top_i = top_v.tolist(), top_i.tolist()
            prompt_steps = []
            for s, token in enumerate(run["tokens"]):
                step = run["steps"][s] if s < len(run["steps"]) else {"top": []}
                want = {token, g[s]} | {t for t, _ in step["top"]}
                want = sorted(t for t in want if 0 <= t < lp.shape[-1])
                values = lp[s, want].tolist()
                prompt_steps.append({"top": list(zip(top_i[s], top_v[s])),
                                     "lp": dict(zip(want, values)) | dict(zip(top_i[s], top_v[s]))})
            steps[name].append(prompt_steps)
    return greedy, steps


# ---- Per model. -------------------------------------------------------------------------------
def good_runs(tandem):
    return {name: t["runs"] for name, t in tandem.items() if "error" not in t and "runs" in t}


def backend_entry(t):
    entry = {"seconds": t.get("seconds")}
    if "error" in t:
        entry.update({"pass": False, "error": t["error"], "command": " ".join(t["command"])})
    return entry


def compare_with_transformers(model_dir, args, torch, transformers):
    config = read_config(model_dir)
    prompts = prompts_for(config, args)
    entry = {"name": model_name(model_dir), "dir": model_dir,
             "architecture": (config.get("architectures") or ["?"])[0],
             "prompt_lengths": [len(p) for p in prompts], "backends": {}}
    with tempfile.TemporaryDirectory() as tmp:
        prompts_file = os.path.join(tmp, "prompts.jsonl")
        with open(prompts_file, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(p) + "\n" for p in prompts)
        tandem = {name: run_tandem(args.tandem_generate, model_dir, prompts_file, prompts, args,
                                   backend, extra, args.top_k if with_lp else None)
                  for name, (backend, extra, with_lp) in RUNS.items() if name in args.runs}
    runs = good_runs(tandem)
    refs = {}
    try:
        for label, dtype in (("hf_bf16", torch.bfloat16), ("hf_f32", torch.float32)):
            start = time.monotonic()
            model, warnings = load_hf(torch, transformers, model_dir, dtype)
            if warnings:
                entry.setdefault("warnings", []).extend(f"{label}: {w}" for w in warnings)
                for w in warnings:
                    print(f"compare_transformers.py: WARNING {model_dir} {label}: {w}",
                          file=sys.stderr)
            refs[label] = hf_reference(torch, model, prompts, runs, args.max_tokens)
            entry.setdefault("reference_tokens", {})[label] = refs[label][0]
            entry[f"{label}_seconds"] = round(time.monotonic() - start, 2)
            entry["transformers_class"] = type(model).__name__
            del model
            torch.cuda.empty_cache()
    except Exception as e:  # a model transformers cannot load fails this model, not the rest
        entry.update({"pass": False, "error": f"transformers: {type(e).__name__}: {e}"})
        for name, t in tandem.items():
            entry["backends"][name] = dict(backend_entry(t), **{"pass": False})
        return entry
    for name, t in tandem.items():
        b = backend_entry(t)
        entry["backends"][name] = b
        if "error" in t:
            continue
        b["tokens"] = [r["tokens"] for r in t["runs"]]
        bf16_steps, f32_steps = refs["hf_bf16"][1][name], refs["hf_f32"][1][name]
        if RUNS[name][2]:
            noise = rules.reference_noise(t["runs"], bf16_steps, f32_steps)
        else:  # device sampling has no logprobs: the noise on the cuda run's tokens
            noise = entry["backends"].get("cuda", {}).get("reference_bf16_noise")
        b["reference_bf16_noise"] = noise  # transformers bf16 vs f32 on this run's tokens
        vs_f32 = (rules.F32_TOLERANCE, rules.F32_TOLERANCE) if RUNS[name][0] == "cpu" else \
            rules.bf16_tolerances(noise, against_bf16=False)
        b["vs"] = {
            "hf_bf16": rules.compare_backend(t["runs"], bf16_steps, refs["hf_bf16"][0],
                                             *rules.bf16_tolerances(noise, against_bf16=True)),
            "hf_f32": rules.compare_backend(t["runs"], f32_steps, refs["hf_f32"][0], *vs_f32),
        }
        b["pass"] = all(v["pass"] for v in b["vs"].values())
        if not RUNS[name][2] and "cuda" in runs:
            # The same logits as the cuda run: the same tokens, but where that run's own top-2
            # are within the near-tie limit (its logits may come from other GEMM shapes).
            same = rules.compare_token_runs(runs["cuda"], t["runs"], runs["cuda"],
                                            tie=rules.margin_tolerance(vs_f32[0]))
            b["same_tokens_as_cuda"] = same
            b["pass"] = b["pass"] and same["pass"]
    entry["pass"] = all(b.get("pass") for b in entry["backends"].values())
    return entry


def self_check(model_dir, args):
    """tandem's cpu run (top-K) against its cpu run with top-20 on one thread; --backend cuda
    works or fails cleanly."""
    config = read_config(model_dir)
    prompts = prompts_for(config, args)
    entry = {"name": model_name(model_dir), "dir": model_dir,
             "architecture": (config.get("architectures") or ["?"])[0],
             "prompt_lengths": [len(p) for p in prompts], "backends": {}}
    with tempfile.TemporaryDirectory() as tmp:
        prompts_file = os.path.join(tmp, "prompts.jsonl")
        with open(prompts_file, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(p) + "\n" for p in prompts)
        ref = run_tandem(args.tandem_generate, model_dir, prompts_file, prompts,
                         argparse.Namespace(**dict(vars(args), threads=1)), "cpu", [], 20)
        cpu = run_tandem(args.tandem_generate, model_dir, prompts_file, prompts, args, "cpu", [],
                         args.top_k)
        cuda = run_tandem(args.tandem_generate, model_dir, prompts_file, prompts, args, "cuda", [],
                          args.top_k)
    entry["reference_run"] = dict(backend_entry(ref), name="cpu_top20")
    if "error" in ref:
        entry["pass"] = False
        entry["error"] = "the reference run failed: " + ref["error"]
        return entry
    ref_steps = [[rules.ref_step_from_tandem(s) for s in r["steps"]] for r in ref["runs"]]
    ref_greedy = [r["tokens"] for r in ref["runs"]]
    # No transformers to measure bf16 noise with: cuda (on a GPU machine) gets the caps.
    for name, t, tols in (("cpu", cpu, (rules.F32_TOLERANCE, rules.F32_TOLERANCE)),
                          ("cuda", cuda, rules.bf16_tolerances(None, against_bf16=False))):
        b = backend_entry(t)
        entry["backends"][name] = b
        if name == "cuda" and t.get("exit_code") == 1 and "--backend cuda" in t.get("error", ""):
            b.update({"pass": True, "available": False, "message": t["error"]})
            continue
        if "error" not in t:
            b["vs"] = {"tandem_cpu_top20": rules.compare_backend(t["runs"], ref_steps,
                                                                 ref_greedy, *tols)}
            b["pass"] = b["vs"]["tandem_cpu_top20"]["pass"]
    entry["pass"] = all(b.get("pass") for b in entry["backends"].values())
    return entry


# ---- The report. ------------------------------------------------------------------------------
def report_problems(report):
    """What is missing or inconsistent in a report read back from its JSON (empty: valid)."""
    problems = []
    for key in ("mode", "pass", "exit_code", "settings", "models", "environment"):
        if key not in report:
            problems.append(f"no {key}")
    if problems:
        return problems
    if not isinstance(report["pass"], bool):
        problems.append("pass is not a bool")
    for m in report["models"]:
        for key in ("name", "dir", "pass", "backends"):
            if key not in m:
                problems.append(f"model {m.get('name')}: no {key}")
        for name, b in m.get("backends", {}).items():
            for ref, v in (b.get("vs") or {}).items():
                for key in ("pass", "tolerance", "rms_tolerance", "max_abs_logprob_error",
                            "rms_logprob_error", "first_divergence"):
                    if key not in v:
                        problems.append(f"{m.get('name')}/{name}/{ref}: no {key}")
    passed = bool(report["models"]) and all(m.get("pass") for m in report["models"])
    if report["pass"] != (passed and not report.get("error")):
        problems.append(f"pass {report['pass']} disagrees with the models'")
    return problems


def table(report):
    rows = [("model", "backend", "reference", "max|dlp| (tol)", "rms (tol)", "greedy",
             "verdict")]
    for m in report["models"]:
        if m.get("error"):
            rows.append((m["name"], "-", "-", "-", "-", "-", "FAIL: " + m["error"][:60]))
        for name, b in m["backends"].items():
            if b.get("available") is False:
                rows.append((m["name"], name, "-", "-", "-", "-", "no GPU (clean error): PASS"))
            elif b.get("error"):
                rows.append((m["name"], name, "-", "-", "-", "-", "FAIL: " + b["error"][:60]))
            if "same_tokens_as_cuda" in b:
                same = b["same_tokens_as_cuda"]
                d = same["first_divergence"]
                greedy = "identical" if same["identical"] else f"tie@{d['prompt']}:{d['step']}"
                rows.append((m["name"], name, "cuda (tokens)", "-", "-", greedy,
                             "PASS" if same["pass"] else "FAIL"))
            for ref, v in (b.get("vs") or {}).items():
                d = v["first_divergence"]
                greedy = "identical" if d is None else (
                    f"{'tie' if d['accepted'] else 'DIVERGED'}@{d['prompt']}:{d['step']}")
                errors = ("-", "-") if not v["compared"] else (
                    f"{v['max_abs_logprob_error']:.4f} ({v['tolerance']:.3f})",
                    f"{v['rms_logprob_error']:.4f} ({v['rms_tolerance']:.3f})")
                rows.append((m["name"], name, ref) + errors +
                            (greedy, "PASS" if v["pass"] else "FAIL"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


class Terminated(BaseException):  # not caught by the per-model "except Exception"
    """SIGTERM (run.sh's time limit): write what is done and stop."""


def on_sigterm(signum, frame):
    raise Terminated()


def write_report(report, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(path + ".tmp", path)


def main(argv):
    start = time.monotonic()
    signal.signal(signal.SIGTERM, on_sigterm)
    here = os.path.dirname(os.path.abspath(__file__))
    default_bin = os.path.join(os.environ["TANDEM_BINARY_DIR"], "bin", "tandem-generate") \
        if os.environ.get("TANDEM_BINARY_DIR") else \
        os.path.join(here, "..", "..", "build", "bin", "tandem-generate")
    default_out = os.path.join(os.environ.get("TANDEM_RESULTS_DIR") or ".",
                               "compare_transformers.json")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help="model folders, or folders of them")
    parser.add_argument("--tandem-generate", default=default_bin)
    parser.add_argument("--out", default=default_out)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--tandem-timeout", type=int, default=120,
                        help="seconds one tandem-generate run may take (default 120)")
    parser.add_argument("--time-budget", type=int, default=480,
                        help="seconds for everything (default 480, inside run.sh's 540-second "
                        "part): what is left unrun then fails, and the report is written after "
                        "each model and on SIGTERM")
    parser.add_argument("--self-check", action="store_true")
    parser.add_argument("--runs", default=",".join(RUNS),
                        help=f"which tandem runs (default all: {','.join(RUNS)})")
    parser.add_argument("--backend-override", choices=("cpu", "cuda"),
                        help="run every tandem run on this backend (to test this script where "
                        "there is no GPU: --backend-override cpu)")
    parser.add_argument("--prompt-lengths", default=",".join(map(str, rules.PROMPT_LENGTHS)),
                        help="prompt lengths in tokens (a shorter list for quick tests)")
    args = parser.parse_args(argv)
    args.runs = [r for r in args.runs.split(",") if r]
    if not args.runs or any(r not in RUNS for r in args.runs):
        parser.error(f"--runs takes names from {','.join(RUNS)}")
    if "cuda_device_sampling" in args.runs and "cuda" not in args.runs:
        parser.error("--runs cuda_device_sampling needs the cuda run too")
    try:
        args.prompt_lengths = [int(n) for n in args.prompt_lengths.split(",")]
    except ValueError:
        parser.error("--prompt-lengths takes comma-separated integers")
    if not args.prompt_lengths or min(args.prompt_lengths) < 1:
        parser.error("--prompt-lengths must be positive")
    args.tandem_generate = os.path.abspath(args.tandem_generate)
    args.deadline = start + args.time_budget
    if not 1 <= args.top_k <= REF_TOP:
        parser.error(f"--top-k must be in 1..{REF_TOP}")

    report = {"tool": "scripts/gpu/compare_transformers.py",
              "mode": "self-check" if args.self_check else "transformers",
              "pass": False, "exit_code": 1, "error": None, "models": [],
              "environment": {"python": platform.python_version(),
                              "tandem_generate": args.tandem_generate},
              "settings": {"max_tokens": args.max_tokens, "top_k": args.top_k,
                           "backend_override": args.backend_override,
                           "prompt_lengths": args.prompt_lengths,
                           "runs": {k: {"backend": v[0], "flags": v[1], "logprobs": v[2]}
                                    for k, v in RUNS.items() if k in args.runs},
                           "tolerances": {"f32": rules.F32_TOLERANCE,
                                          "bf16_max": {"factor": rules.BF16_MAX_FACTOR,
                                                       "floor": rules.BF16_MAX_FLOOR,
                                                       "cap": rules.BF16_MAX_CAP},
                                          "bf16_rms": {"factor": rules.BF16_RMS_FACTOR,
                                                       "floor": rules.BF16_RMS_FLOOR,
                                                       "cap": rules.BF16_RMS_CAP},
                                          "near_tie": "2 x the max tolerance",
                                          "same_logits_tie": rules.SAME_LOGITS_TIE}}}
    dirs = model_dirs(args.models)
    torch = transformers = None
    if not dirs:
        report["error"] = f"no model folders (with config.json) in {args.models}"
    elif not os.access(args.tandem_generate, os.X_OK):
        report["error"] = f"{args.tandem_generate} is not an executable"
    elif not args.self_check:
        try:
            torch, transformers = import_torch()
            report["environment"].update({
                "torch": torch.__version__, "transformers": transformers.__version__,
                "torch_cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
                "torch_fake": bool(getattr(torch, "__fake__", False))})
        except Missing as e:
            report.update({"error": str(e), "exit_code": 2})
    if report["error"] is None:
        try:
            for d in dirs:
                if time.monotonic() >= args.deadline:
                    report["models"].append({"name": model_name(d), "dir": d, "pass": False,
                                             "error": "not run: out of the --time-budget",
                                             "backends": {}})
                    continue
                print(f"compare_transformers.py: {d}", file=sys.stderr, flush=True)
                entry = self_check(d, args) if args.self_check else \
                    compare_with_transformers(d, args, torch, transformers)
                report["models"].append(entry)
                write_report(report, args.out)  # what is done survives a kill
        except Terminated:
            report["error"] = f"terminated (SIGTERM) after {len(report['models'])} model(s)"
        report["pass"] = not report["error"] and all(m["pass"] for m in report["models"])
        report["exit_code"] = 0 if report["pass"] else 1
    write_report(report, args.out)
    with open(args.out, encoding="utf-8") as f:
        problems = report_problems(json.load(f))
    if report["models"]:
        print(table(report))
    if problems:
        print(f"compare_transformers.py: {args.out} is inconsistent: {problems}", file=sys.stderr)
        return 1
    if report["error"]:
        print(f"compare_transformers.py: {report['error']}", file=sys.stderr)
    for m in report["models"]:
        for w in m.get("warnings", []):
            print(f"  {m['name']}: WARNING {w}", file=sys.stderr)
        for name, b in m["backends"].items():
            for ref, v in (b.get("vs") or {}).items():
                for failure in v["failures"][:5]:
                    print(f"  {m['name']}/{name} vs {ref}: {failure}", file=sys.stderr)
            for failure in (b.get("same_tokens_as_cuda") or {}).get("failures", [])[:5]:
                print(f"  {m['name']}/{name} vs cuda: {failure}", file=sys.stderr)
    print(f"compare_transformers.py: {'PASS' if report['pass'] else 'FAIL'}; wrote {args.out}",
          file=sys.stderr)
    return report["exit_code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
