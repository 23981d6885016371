#!/usr/bin/env python3
"""Checks that tandem's folders depend on each other only as the README's *Layout* allows.

Reads every `#include "..."` of the C++ and CUDA sources under the product's folders, maps the
including file and the included one to their units (a folder of common/, common/backend/cuda and
common/backend/sim on their own, or a top-level folder), and fails, naming each file and include,
where a unit includes one it may not. Units may include themselves; tools/, bench/ and tests/ may
include anything (they sit on top).

  scripts/check_layering.py [SOURCE_DIR]      exit 0: layering holds; 1: violations listed
  scripts/check_layering.py --self-test       checks the checker on a planted tree
"""

import os
import re
import sys
import tempfile

# unit -> the units it may include. Lower layers first; keep in step with README.md, *Layout*.
ALLOWED = {
    "proto": set(),
    "common/types": set(),
    "common/util": set(),
    "common/kv": {"common/types", "common/util"},
    "common/sampling": {"common/types", "common/util"},
    "common/model": {"common/types", "common/util"},
    "common/tokenizer": {"common/types", "common/util"},
    "common/metrics": {"common/util"},
    "common/tls": {"common/util"},
    # The CPU backend: the model's forward pass, paged attention, the backend interface.
    "common/backend": {"common/kv", "common/model", "common/types", "common/util"},
    # Kernels' CPU references reuse the cpu backend's own functions (paged_attention.h).
    "kernels": {"common/backend", "common/kv", "common/types", "common/util"},
    "common/backend/cuda": {"common/backend", "common/kv", "common/model", "common/types",
                            "common/util", "kernels"},
    "common/backend/sim": {"common/backend", "common/kv", "common/model", "common/types",
                           "common/util"},
    "common/engine": {"common/backend", "common/kv", "common/sampling", "common/types",
                      "common/util"},
    # Transports move bytes between pools: no engine types (common/handoff adapts the two).
    "common/transport": {"common/kv", "common/types", "common/util", "proto"},
    "common/handoff": {"common/engine", "common/kv", "common/transport", "common/types",
                       "common/util", "proto"},
    "common/serving": {"common/backend", "common/backend/cuda", "common/backend/sim",
                       "common/engine", "common/handoff", "common/kv", "common/metrics",
                       "common/model", "common/sampling", "common/tls", "common/tokenizer",
                       "common/transport", "common/types", "common/util", "kernels", "proto"},
    # The router sees nodes only through gRPC: no engine, backend or transport.
    "router": {"common/kv", "common/metrics", "common/model", "common/sampling", "common/tls",
               "common/tokenizer", "common/types", "common/util", "proto"},
    "prefill_node": {"common/engine", "common/handoff", "common/kv", "common/metrics",
                     "common/serving", "common/transport", "common/types", "common/util",
                     "proto"},
    # A decode node also serves the prefill role in auto mode (--serve-prefill): it links the
    # prefill node's service; never the other way round.
    "decode_node": {"common/engine", "common/handoff", "common/kv", "common/metrics",
                    "common/serving", "common/transport", "common/types", "common/util",
                    "prefill_node", "proto"},
}
ON_TOP = {"tools", "bench", "tests"}  # may include anything
SCANNED = ("common", "kernels", "router", "prefill_node", "decode_node")
SUFFIXES = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
KNOWN_TOP = ("common/", "kernels/", "router/", "prefill_node/", "decode_node/", "tools/",
             "bench/", "tests/", "tandem/v1/", "proto/")


def unit_of(path):
    """The unit of a repository-relative path (or of an include)."""
    if path.startswith("tandem/v1/") or path.startswith("proto/"):
        return "proto"
    parts = path.split("/")
    if parts[0] == "common" and len(parts) > 2:
        if parts[1] == "backend" and len(parts) > 3 and parts[2] in ("cuda", "sim"):
            return "common/backend/" + parts[2]
        return "common/" + parts[1]
    return parts[0]


def violations(root):
    found = []
    for top in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                unit = unit_of(rel)
                allowed = ALLOWED.get(unit)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or not m.group(1).startswith(KNOWN_TOP):
                            continue
                        target = unit_of(m.group(1))
                        if target == unit or unit in ON_TOP:
                            continue
                        if allowed is None:
                            found.append(f"{rel}: unit {unit} is not in the layering table")
                            break
                        if target not in allowed:
                            found.append(f"{rel}:{number}: {unit} may not include {target} "
                                         f"({m.group(1)})")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        write("common/transport/ok.cc", '#include "common/util/clock.h"\n#include <vector>\n')
        write("common/transport/bad.cc", '#include "common/kv/kv_layout.h"\n'
                                         '#include "common/engine/request.h"\n')
        write("router/bad.h", '#include "common/engine/engine.h"\n')
        write("common/backend/cuda/ok.cc", '#include "kernels/gemm.h"\n')
        write("common/backend/bad.cc", '#include "kernels/gemm.h"\n')
        write("common/newthing/x.h", '#include "common/util/clock.h"\n')
        got = violations(root)
        want = [
            "common/backend/bad.cc:1: common/backend may not include kernels (kernels/gemm.h)",
            "common/newthing/x.h: unit common/newthing is not in the layering table",
            "common/transport/bad.cc:2: common/transport may not include common/engine "
            "(common/engine/request.h)",
            "router/bad.h:1: router may not include common/engine (common/engine/engine.h)",
        ]
        if sorted(got) != sorted(want):
            print("check_layering.py --self-test FAILED:\n got:  " + "\n       ".join(sorted(got))
                  + "\n want: " + "\n       ".join(sorted(want)))
            return 1
    print("check_layering.py --self-test: the planted violations, and only they, were found")
    return 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = violations(root)
    if found:
        print(f"check_layering.py: {len(found)} include(s) break the layering (README.md, Layout):")
        for v in found:
            print("  " + v)
        return 1
    print("check_layering.py: every include follows the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
