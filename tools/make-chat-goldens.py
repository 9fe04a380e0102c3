#!/usr/bin/env python3
"""Writes test/unit/text/chat/data/goldens.json: what transformers renders.

Re-run after changing a case or a template:

    .venv/bin/python tools/make-chat-goldens.py

Two kinds of cases, both rendered by transformers itself, offline:
- "conversations": each published template (qwen3.jinja, deepseek-v3.jinja,
  mixtral.jinja) through `PreTrainedTokenizerFast.apply_chat_template(...,
  tokenize=False)` with the model's bos/eos tokens. Each case stores the
  exact context transformers hands to the template (special tokens, the
  normalised messages, tools, documents, add_generation_prompt, extra
  keywords), so the C++ renderer is given the same variables.
- "snippets": small templates through transformers' own jinja environment
  (`_compile_jinja_template`), to pin the interpreter's semantics.

A case that raises stores the error: for raise_exception() the message is
the template's own and must match exactly; other errors only must occur.
The output is deterministic (no clock: strftime_now is not used).
"""

import json
import pathlib
import sys

import jinja2
import tokenizers
import transformers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from transformers.utils import chat_template_utils as ctu

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "test/unit/text/chat/data"

MODELS = {
    "qwen3": {"bos": None, "eos": "<|im_end|>"},
    "deepseek-v3": {"bos": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "eos": "<\uff5cend\u2581of\u2581sentence\uff5c>"},
    "mixtral": {"bos": "<s>", "eos": "</s>"},
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time in a zone", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}},
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "The capital of France is Paris."}
USER2 = {"role": "user", "content": "And of Germany?"}
UNICODE_USER = {"role": "user", "content": "Grüße! 你好，世界 🌍🚀 — «naïve» café\tnewline\nend"}
THINK_ASSISTANT = {"role": "assistant", "content": "<think>\nThe user asks about France. Paris.\n</think>\n\nThe capital is Paris."}


def tool_call_turns(arguments_as_string, content):
    args = {"city": "Paris", "unit": "celsius"}
    call = {"type": "function", "function": {"name": "get_weather", "arguments": json.dumps(args) if arguments_as_string else args}}
    call2 = {"type": "function", "function": {"name": "get_time", "arguments": json.dumps({"zone": "CET"}) if arguments_as_string else {"zone": "CET"}}}
    return [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": content, "tool_calls": [call, call2]},
        {"role": "tool", "content": '{"temperature": 21, "sky": "clear"}'},
        {"role": "tool", "content": "14:05"},
        {"role": "assistant", "content": "It is 21 °C and clear; the time is 14:05."},
        {"role": "user", "content": "Thanks!"},
    ]


def conversations():
    """(template, name, messages, add_generation_prompt, tools, extra kwargs)"""
    cases = []
    for model in MODELS:
        cases += [
            (model, "single-user", [USER], True, None, {}),
            (model, "single-user-no-prompt", [USER], False, None, {}),
            (model, "system-user", [SYSTEM, USER], True, None, {}),
            (model, "multi-turn", [SYSTEM, USER, ASSISTANT, USER2], True, None, {}),
            (model, "multi-turn-ends-assistant", [USER, ASSISTANT], False, None, {}),
            (model, "unicode-emoji", [UNICODE_USER, {"role": "assistant", "content": "Hallo! 👋 Ça va ?"}, USER2], True, None, {}),
            (model, "empty-content", [{"role": "user", "content": ""}], True, None, {}),
            (model, "think-in-history", [USER, THINK_ASSISTANT, USER2], True, None, {}),
        ]
    # Qwen3: thinking switch, reasoning fields, tools, multi-step tool use.
    cases += [
        ("qwen3", "enable-thinking-false", [USER], True, None, {"enable_thinking": False}),
        ("qwen3", "enable-thinking-true", [USER], True, None, {"enable_thinking": True}),
        ("qwen3", "think-last-assistant", [USER, THINK_ASSISTANT], False, None, {}),
        ("qwen3", "reasoning-content-field", [USER, {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy one."}], False, None, {}),
        ("qwen3", "reasoning-alias-field", [USER, {"role": "assistant", "content": "Paris.", "reasoning": "Known fact."}], False, None, {}),
        ("qwen3", "tools-definitions", [SYSTEM, USER], True, [WEATHER_TOOL, TIME_TOOL], {}),
        ("qwen3", "tools-no-system", [USER], True, [WEATHER_TOOL], {}),
        ("qwen3", "tool-calls-dict-arguments", tool_call_turns(False, ""), True, [WEATHER_TOOL, TIME_TOOL], {}),
        ("qwen3", "tool-calls-string-arguments", [SYSTEM] + tool_call_turns(True, "Let me check."), True, [WEATHER_TOOL, TIME_TOOL], {}),
        ("qwen3", "tool-response-pending", tool_call_turns(False, "")[:4], True, [WEATHER_TOOL], {}),
        # transformers drops content=None, so the template's message.content is undefined.
        ("qwen3", "tool-calls-content-none", tool_call_turns(False, None), True, [WEATHER_TOOL], {}),
        ("qwen3", "second-system-message", [SYSTEM, USER, {"role": "system", "content": "Be brief."}, USER2], True, None, {}),
    ]
    # DeepSeek-V3: several system messages, tool calls (content None) and outputs.
    cases += [
        ("deepseek-v3", "two-system-messages", [SYSTEM, {"role": "system", "content": "Answer in French."}, USER], True, None, {}),
        # The template tests `content is none`, but transformers drops content=None
        # first: the tool-call branch is unreachable and '+' on undefined fails.
        ("deepseek-v3", "tool-calls-content-none", tool_call_turns(True, None), True, [WEATHER_TOOL], {}),
        ("deepseek-v3", "tool-calls-empty-content", tool_call_turns(True, ""), True, [WEATHER_TOOL], {}),
        ("deepseek-v3", "tool-output-pending", tool_call_turns(True, "")[:4], True, [WEATHER_TOOL], {}),
    ]
    # Mixtral: the rejections come from raise_exception().
    cases += [
        ("mixtral", "non-alternating-roles", [USER, USER2], True, None, {}),
        ("mixtral", "starts-with-assistant", [ASSISTANT, USER], True, None, {}),
        ("mixtral", "tool-role-rejected", [USER, ASSISTANT, {"role": "tool", "content": "x"}], True, None, {}),
        ("mixtral", "system-then-assistant", [SYSTEM, ASSISTANT], True, None, {}),
    ]
    return cases


# (name, template, context). Contexts are what the template sees.
SNIPPETS = [
    ("whitespace-trim-lstrip", "  {# c #}\nA\n  {% if true %}\nB\n  {% endif %}  \nC\n", {}),
    ("whitespace-dash", "a  {%- if true -%}  b  {%- endif -%}  c\n\n", {}),
    ("whitespace-plus", "a\n  {%+ if true %}\nb{% endif +%}\nc\n", {}),
    ("whitespace-print-dash", "x  {{- 1 -}}  \n y {{ 2 }}\n z", {}),
    ("whitespace-crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
    ("comment-dash", "a {#- c -#} b {# d #}\ne", {}),
    ("lstrip-template-start", "   {% if true %}x{% endif %}\n  {# c #}y", {}),
    ("lstrip-not-after-text", "{{ 1 }}   {% if true %}x{% endif %} z {% if true %}y{% endif %}", {}),
    ("lstrip-not-print", "a\n   {{ 1 }}\n\t{{ 2 }}", {}),
    ("lstrip-after-trimmed-newline", "{% if true %}\n   {% if true %}x{% endif %}\n{% endif %}", {}),
    ("dash-multiline", "a\n\n  {%- if true %}\n\n  b{% endif -%}\n\n  c", {}),
    ("string-literals", "{{ 'a\\tb' }}|{{ \"q\\\"\" }}|{{ 'x\\u00e9\\U0001F600\\x41' }}|{{ 'unknown\\d' }}|{{ 'adj' \"acent\" }}|{{ '{{ not a tag }}' }}|{{ {'k': {'n': 1}} }}", {}),
    ("precedence", "{{ -3|abs }}|{{ not true|string }}|{{ 'x' ~ 2 * 3 }}|{{ 1 ~ 2 + 3 ~ 4 }}|{{ 2 * 3 ** 2 }}|{{ -2 ** 2 }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ x is not defined and 1 }}|{{ not 1 == 2 }}|{{ [1, 2]|length > 1 }}", {}),
    ("nested-loops", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ b }} {% endfor %}{% endfor %}", {}),
    ("print-values", "{{ none }}|{{ true }}|{{ False }}|{{ 1 }}|{{ 1.0 }}|{{ 1.5e16 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}|{{ -0.0 }}", {}),
    ("print-containers", "{{ [1, 'a', none, true, 1.5, {'k': (1, 2)}, (3,), ()] }}|{{ {'x': \"it's\", 'y': 'say \"hi\"'} }}|{{ [\"tab\\t\", 'nl\\n', 'bs\\\\'] }}", {}),
    ("print-unicode-repr", "{{ ['é', '你好', '🌍', '\\u200b', '\\xa0'] }}", {}),
    ("print-undefined", "[{{ missing }}]{{ [missing] }}", {}),
    ("arith-int-float", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2.0 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ true + 1 }}", {}),
    ("arith-strings-lists", "{{ 'ab' * 3 }}|{{ [1] * 2 + [3] }}|{{ 'a' ~ 1 ~ none ~ true }}|{{ 'x' + 'y' }}", {}),
    ("compare", "{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ none == none }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }} {{ (1, 2) == [1, 2] }}", {}),
    ("logic-operands", "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ [] and 1 }}|{{ none or none }}|{{ not [] }}|{{ not 'a' }}", {}),
    ("inline-if", "{{ 'y' if 1 else 'n' }}|{{ 'y' if 0 }}|{{ 'a' if false else 'b' if true else 'c' }}", {}),
    ("subscript-slices", "{{ s[0] }}{{ s[-1] }}{{ s[1:] }}{{ s[::-1] }}{{ s[:2] }}{{ l[1:3] }}{{ l[::-2] }}{{ l[-2:] }}{{ l[10] is defined }}{{ d['a'] }}{{ d.a }}{{ d['zz'] is defined }}{{ l.0 }}", {"s": "héllo🌍", "l": [1, 2, 3, 4], "d": {"a": 1}}),
    ("undefined-semantics", "{{ x is defined }}{{ x is undefined }}{{ x|length }}{{ x == x }}{% for i in x %}no{% else %}empty{% endfor %}{{ x|default('dflt') }}{{ none|default('nd') }}{{ ''|default('e', true) }}{{ d.missing is defined }}", {"d": {}}),
    ("tests", "{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ none is none }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ false is false }}{{ 0 is false }}{{ true is true }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is eq 1 }}{{ 'a' is equalto 'a' }}{{ 2 is gt 1 }}{{ 2 is in [2] }}{{ x is not none }}", {}),
    ("for-loop-vars", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}", {"l": ["p", "q", "r"]}),
    ("for-filter-else", "{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }}{{ ',' if not loop.last }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for-dict-items-unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}", {"d": {"z": 1, "y": 2}}),
    ("for-break-continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("scoping", "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("set-forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}{% set block %}inside {{ a }}{% endset %}[{{ block }}]", {}),
    ("macro-call", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(name='Cy') }}{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %}", {}),
    ("macro-closures", "{% macro row(x, y=x * 2) %}{{ x }}:{{ y }}{% endmacro %}{% macro box() %}[{{ caller() }}]{% endmacro %}{% for m in ['a', 'b'] %}{% call box() %}{{ m }}{{ loop.index }}{% endcall %}{% endfor %}{{ row(3) }}{{ row(1, 5) }}", {}),
    ("filters-text", "{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ \"hello wORLD-foo (bar) they're\"|title }}|{{ 'hELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 42|string }}|{{ '<b>'|safe }}", {}),
    ("filters-numbers", "{{ '42'|int }}{{ '4.7'|int }}{{ 'x'|int }}{{ 'x'|int(7) }}{{ 3.9|int }}{{ '2.5'|float }}{{ 'x'|float }}{{ -3|abs }}{{ -2.5|abs }}{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 2.1|round(0, 'ceil') }}{{ 2.9|round(0, 'floor') }}{{ 7|round }}", {}),
    ("filters-lists", "{{ l|length }}{{ l|count }}{{ l|first }}{{ l|last }}{{ l|join('-') }}{{ l|reverse|list }}{{ 'abc'|reverse }}{{ 'ab'|list }}{{ l|sort }}{{ l|sort(reverse=true) }}{{ ['b', 'A', 'a']|unique|list }}{{ ['b', 'A', 'c']|sort }}{{ d|items|list }}{{ [1, 0, 2]|select|list }}{{ [1, 0, 2]|reject|list }}{{ l|map('string')|join }}", {"l": [3, 1, 2], "d": {"k": "v"}}),
    ("filters-attributes", "{{ msgs|map(attribute='role')|list }}{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}{{ msgs|rejectattr('role', 'eq', 'user')|list|length }}{{ msgs|selectattr('tool')|list|length }}{{ msgs|map(attribute='missing', default='-')|join }}{{ msgs|join(',', attribute='role') }}{{ msgs|sort(attribute='content')|map(attribute='content')|join }}", {"msgs": [{"role": "user", "content": "b"}, {"role": "assistant", "content": "a", "tool": 1}, {"role": "user", "content": "c"}]}),
    ("tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ [1.0, 2.5e-7, 'é\"\\n', none, true]|tojson }}|{{ d|tojson(sort_keys=true) }}|{{ {}|tojson(indent=4) }}|{{ 'ü🌍'|tojson(ensure_ascii=true) }}|{{ d|tojson(separators=(',', ':')) }}", {"d": {"z": [1, {"b": None}], "a": "x"}}),
    ("string-methods", "{{ s.startswith('He') }}{{ s.endswith(('x', 'd!')) }}{{ s.split() }}{{ s.split('l') }}{{ s.split('l', 1) }}{{ s.rsplit('l', 1) }}{{ '  a  b  '.split(None, 1) }}{{ '  a  b  '.rsplit(None, 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ s.strip('H!') }}{{ s.lstrip('eH') }}{{ s.rstrip('!d') }}{{ s.upper() }}{{ s.lower() }}{{ s.replace('l', 'L') }}{{ s.title() }}{{ 'x y'.capitalize() }}{{ s.find('o') }}{{ s.count('l') }}{{ ', '.join(['a', 'b']) }}{{ '12'.isdigit() }}{{ '\\u3000 x\\u3000'.strip() }}", {"s": "Hello World!"}),
    ("dict-methods", "{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 5) }}{{ d['items'] }}{{ d.items is defined }}", {"d": {"a": 1, "items": "field"}}),
    ("namespace-dict", "{% set ns = namespace(a=1, b='x') %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}{% set ns.c = [1] %}{{ ns.c }}{{ dict(a=1, b=2) }}", {}),
    ("messages-normalised", "{% for m in messages %}{{ m }}\n{% endfor %}", {"messages": [{"role": "user", "content": "q", "name": None}, {"role": "assistant", "content": "a", "reasoning": "r"}, {"role": "assistant", "content": None, "thinking": "t", "reasoning_content": None}]}),
    ("raise-exception", "{% if messages|length == 0 %}{{ raise_exception('No messages were given!') }}{% endif %}ok", {"messages": []}),
    ("error-undefined-attribute", "{{ x.y }}", {}),
    ("error-add-undefined", "{{ 'a' + x }}", {}),
    ("error-type-mismatch", "{{ 'a' + 1 }}", {}),
    ("error-divide-zero", "{{ 1 / 0 }}", {}),
    ("error-list-append", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("error-tojson-undefined", "{{ x|tojson }}", {}),
]


def make_tokenizer(model):
    backend = tokenizers.Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>"))
    tok = PreTrainedTokenizerFast(tokenizer_object=backend)
    tok.chat_template = (DATA / f"{model}.jinja").read_text(encoding="utf-8")
    tok.bos_token = MODELS[model]["bos"]
    tok.eos_token = MODELS[model]["eos"]
    return tok


def template_context(tok, messages, add_generation_prompt, tools, kwargs):
    """What render_jinja_template passes to the template, in its order."""
    context = {"messages": ctu._alias_reasoning_fields(ctu._normalize_chat_messages(messages))}
    context["tools"] = tools
    context["documents"] = None
    context["add_generation_prompt"] = add_generation_prompt
    context.update({**tok.special_tokens_map, **kwargs})
    return context


def render_conversation(model, name, messages, add_generation_prompt, tools, kwargs):
    tok = make_tokenizer(model)
    case = {"name": f"{model}/{name}", "template": f"{model}.jinja",
            "context": template_context(tok, messages, add_generation_prompt, tools, kwargs)}
    try:
        case["output"] = tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                                 add_generation_prompt=add_generation_prompt, **kwargs)
    except jinja2.exceptions.TemplateError as e:
        record_error(case, e)
    return case


def record_error(case, e):
    # Only raise_exception's message is the template's own, to be matched
    # exactly; other errors (undefined, type, security) must merely occur.
    raised = type(e) is jinja2.exceptions.TemplateError
    case["error"] = str(e) if raised else None
    case["error_kind"] = type(e).__name__


def render_snippet(name, source, context):
    case = {"name": name, "source": source, "context": context}
    try:
        template_vars = dict(context)
        if "messages" in template_vars:
            template_vars["messages"] = ctu._alias_reasoning_fields(ctu._normalize_chat_messages(context["messages"]))
        case["output"] = ctu._compile_jinja_template(source).render(**template_vars)
    except (jinja2.exceptions.TemplateError, TypeError, ZeroDivisionError, ValueError) as e:
        record_error(case, e)
    return case


def main():
    out = {
        "generated_by": "tools/make-chat-goldens.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "conversations": [render_conversation(*c) for c in conversations()],
        "snippets": [render_snippet(*s) for s in SNIPPETS],
    }
    path = DATA / "goldens.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}: {len(out['conversations'])} conversations, {len(out['snippets'])} snippets")


if __name__ == "__main__":
    sys.exit(main())
