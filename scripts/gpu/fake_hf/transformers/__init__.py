"""A stand-in for transformers' AutoModelForCausalLM over reference_forward.py (see ../torch):
the model folders load into a pure-Python forward that follows modeling_llama/qwen2/qwen3, in
f64 for dtype float32 and with transformers' bf16 roundings for dtype bfloat16. Only for
compare_transformers_test.py."""

import json
import os

import torch
from reference_forward import ReferenceModel

__version__ = "5.0.0-fake"
__fake__ = True


class _Output:
    def __init__(self, last_hidden_state):
        self.last_hidden_state = last_hidden_state


class _Param:
    def __init__(self, dtype):
        self.dtype = dtype


class _Weight(torch.Tensor):
    def data_ptr(self):
        return id(self.data)  # the same rows object when tied


class _Linear:
    def __init__(self, rows):
        self.weight, self.bias = _Weight(rows), None


class _Base:
    def __init__(self, ref):
        self.ref = ref

    def __call__(self, input_ids=None, use_cache=None):
        (tokens,) = input_ids.tolist()
        return _Output(torch.Tensor([self.ref.hidden_states(tokens)]))


class _Config:
    def __init__(self, d):
        self.__dict__.update(d)
        if d.get("rope_scaling"):
            self.rope_parameters = dict(d["rope_scaling"], rope_theta=d.get("rope_theta"))
        else:
            self.rope_parameters = {"rope_type": "default", "rope_theta": d.get("rope_theta")}


class _CausalLM:
    base_model_prefix = "model"

    def __init__(self, model_dir, dtype):
        ref = ReferenceModel(model_dir, "hf_bf16" if dtype is torch.bfloat16 else None)
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.config = _Config(json.load(f))
        self.model = _Base(ref)
        self._head = _Linear(ref.lm_head())
        self._embed = _Linear(ref.matrix("model.embed_tokens.weight", ref.hidden))
        self._dtype = dtype

    def cuda(self):
        return self

    def eval(self):
        return self

    def parameters(self):
        yield _Param(self._dtype)

    def get_output_embeddings(self):
        return self._head

    def get_input_embeddings(self):
        return self._embed


class LlamaForCausalLM(_CausalLM):
    pass


class Qwen2ForCausalLM(_CausalLM):
    pass


class Qwen3ForCausalLM(_CausalLM):
    pass


class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(model_dir, local_files_only=False, attn_implementation=None,
                        output_loading_info=False, dtype=None, torch_dtype=None):
        if not local_files_only:
            raise ValueError("fake transformers: local_files_only=True expected")
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            arch = json.load(f)["architectures"][0]
        model = globals()[arch](model_dir, dtype or torch_dtype)
        info = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": [],
                "error_msgs": []}
        return (model, info) if output_loading_info else model
