#!/usr/bin/env python3
"""A tandem-generate that is a little wrong, for the test that the comparison notices: runs the
real one (TANDEM_REAL_GENERATE) with the same arguments and adds TANDEM_PERTURB_LOGPROBS
(default -0.1) to every logprob it prints. Only for compare_transformers_fake_hf_detects_errors."""

import json
import os
import subprocess
import sys

delta = float(os.environ.get("TANDEM_PERTURB_LOGPROBS", "-0.1"))
p = subprocess.run([os.environ["TANDEM_REAL_GENERATE"]] + sys.argv[1:], capture_output=True,
                   text=True)
sys.stderr.write(p.stderr)
for line in p.stdout.splitlines():
    j = json.loads(line)
    for step in j.get("logprobs") or []:
        step["logprob"] += delta
        for top in step["top_logprobs"]:
            top["logprob"] += delta
    print(json.dumps(j))
sys.exit(p.returncode)
