#!/usr/bin/env python3
"""Jinja chat-template fixtures: what transformers renders, for shardft's own Jinja interpreter
(src/jinja/*.cpp) and its chat-template hook (src/data/chat_template_jinja.cpp).

Writes, next to this script:
  jinja/<name>.jinja       the chat templates below, WRITTEN FOR THE TESTS in the styles of ChatML,
                           Llama-3, Mistral [INST], Gemma, Phi-3, a tool-ish template and a reasoning
                           (think-stripping) template; together they use every construct the
                           interpreter supports. None is a real model's template.
  jinja_chat.json          {"snippets": [...], "templates": [...], "cases": [...]}:
    snippets   one small template per construct, its variables and jinja2's output (or "error": true
               and the message) from transformers' own environment (_compile_jinja_template:
               ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, generation,
               tojson / raise_exception / strftime_now);
    templates  name, .jinja file, tokenizer.json (the committed BPE fixtures under bpe/), bos/eos tokens;
    cases      per template and conversation: apply_chat_template(tokenize=False) text (or the
               raise_exception error), the token ids of apply_chat_template(tokenize=True), and the
               assistant mask: return_assistant_tokens_mask=True's for templates with {% generation %};
               otherwise the trl-style prefix mask (for assistant turn i, the characters between
               render(messages[:i], add_generation_prompt=True) and render(messages[:i+1]), mapped to
               tokens with the same char_to_token rule transformers uses for its mask).

Regenerate with:  .cache/hfvenv/bin/python tests/reference/make_jinja_chat_fixtures.py
(transformers 4.46.3, tokenizers 0.20.3, jinja2 3.1; nothing is downloaded). Deterministic except for
strftime_now, whose snippet only checks the length of a year.
"""

import json
import os

from jinja2.exceptions import TemplateError
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import _compile_jinja_template

HERE = os.path.dirname(os.path.abspath(__file__))

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": " Hello there "}]

# (name, template, variables): one construct each, rendered by transformers' environment.
SNIPPETS = [
    ("text_only", "plain text\n", {}),
    ("print_string", "{{ 'a' }}{{ \"b\" }}", {}),
    ("print_escapes", "{{ 'tab\\there\\nnew \\u00e9 \\x41 \\'q\\'' }}", {}),
    ("print_adjacent_strings", "{{ 'ab' 'cd' }}", {}),
    ("print_numbers", "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 10 / 4 }} {{ 2.0 }} {{ 1e20 }} {{ 1e-7 }} {{ 1_000 }}", {}),
    ("print_none_bool", "{{ none }} {{ None }} {{ true }} {{ False }}", {}),
    ("print_list_dict", "{{ [1, 'a', none, true] }} {{ {'k': 'v', 'n': 1.25} }} {{ {\"q\": \"it's\"} }}", {}),
    ("print_undefined", "[{{ nothing }}][{{ messages[5] }}][{{ d.missing }}]", {"messages": MSGS, "d": {}}),
    ("comment", "a{# a comment #}b", {}),
    ("comment_trim", "a\n  {# c #}\nb", {}),
    ("whitespace_minus", "a  {{- 'b' -}}  c\n {%- if true -%}  d  {%- endif -%} \n e", {}),
    ("whitespace_plus", "a\n  {%+ if true %}\nb{% endif +%}\nc", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "x\n    {% if true %}\n    indented\n    {% endif %}\ny", {}),
    ("lstrip_not_variables", "x\n    {{ 'v' }}\ny", {}),
    ("lstrip_after_text", "x   {% if true %}t{% endif %}", {}),
    ("trailing_newline", "line\n", {}),
    ("crlf_source", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}", {}),
    ("for_cycle", "{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("for_if_filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}/{{ loop.length }} {% endfor %}", {"messages": MSGS}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in nothing %}x{% else %}undef{% endfor %}", {}),
    ("for_unpack", "{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}", {}),
    ("for_dict_keys", "{% for k in {'z': 1, 'a': 2} %}{{ k }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("break_continue", "{% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("set_scoping", "{% set x = 1 %}{% for i in range(3) %}[{{ x }}]{% set x = 5 %}{% endfor %}({{ x }}){% if true %}{% set y = 2 %}{% endif %}{{ y }}", {}),
    ("set_tuple", "{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c + d }}", {}),
    ("set_block", "{% set block %}\n  inner {{ 1 + 1 }}\n{% endset %}[{{ block }}]", {}),
    ("namespace", "{% set ns = namespace(count=0, seen=false) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% if m.role == 'user' %}{% set ns.seen = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.seen }}", {"messages": MSGS}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}", {}),
    ("macro_sees_later_globals", "{% macro m() %}{{ g }}{% endmacro %}{% set g = 7 %}{{ m() }}", {}),
    ("filter_trim", "[{{ '  \\u00a0x y\\t\\n' | trim }}][{{ 'xxhixx' | trim('x') }}][{{ nothing | trim }}]", {}),
    ("filter_tojson", "{{ {'a': [1, 2.5, none, true, 'é\"\\n'], 'b': {}} | tojson }}", {}),
    ("filter_tojson_indent", "{{ {'a': [1, {'b': 'c'}], 'e': [], 'f': 'x'} | tojson(indent=2) }}", {}),
    ("filter_tojson_messages", "{{ messages | tojson }}", {"messages": MSGS}),
    ("filter_length", "{{ 'héllo' | length }} {{ [1, 2] | length }} {{ {'a': 1} | count }} {{ nothing | length }}", {}),
    ("filter_upper_lower", "{{ 'MiXed' | upper }} {{ 'MiXed' | lower }}", {}),
    ("filter_replace", "{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }}", {}),
    ("filter_default", "{{ nothing | default('dflt') }} {{ '' | default('e') }} {{ '' | default('e', true) }} {{ none | d('n', boolean=true) }}", {}),
    ("filter_join", "{{ ['a', 'b', 1] | join(', ') }} {{ messages | map(attribute='role') | join('/') }}", {"messages": MSGS}),
    ("filter_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'xyz' | first }} {{ (messages | last).role }}", {"messages": MSGS}),
    ("filter_list_string", "{{ 'ab' | list }} {{ 42 | string ~ '!' }} {{ [1] | string }}", {}),
    ("filter_capitalize_title", "{{ 'hELLO world' | capitalize }} {{ 'hello big-world (x)' | title }}", {}),
    ("filter_items", "{% for k, v in {'x': 1, 'y': 2} | items %}{{ k }}{{ v }}{% endfor %}", {}),
    ("filter_select_reject", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | join(',') }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('even') | list }}", {"messages": MSGS}),
    ("filter_misc", "{{ [3, 1, 2] | sort }} {{ [1, 1, 2] | unique | list }} {{ [1, 2] | sum }} {{ -3 | abs }} {{ '7' | int + 1 }} {{ 'x' | int }} {{ [1, 2] | reverse | list }} {{ 'ab' | reverse }}", {}),
    ("filter_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(3, true) }}", {}),
    ("filter_chain_precedence", "{{ 'a' ~ ' b ' | trim ~ 'c' }} {{ -1 | abs }}", {}),
    ("slice_string", "{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'héllo'[1] }} {{ 'hello'[-2:] }} {{ 'hello'[:-1:2] }}", {}),
    ("slice_list", "{{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][::2] }} {{ [1, 2, 3, 4][-1] }} {{ messages[1:] | length }}", {"messages": MSGS}),
    ("index_attr", "{{ messages[0]['role'] }} {{ messages[0].content }} {{ messages[-1]['content'] }} {{ {'a': {'b': 'c'}}.a.b }}", {"messages": MSGS}),
    ("in_not_in", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'cat' }} {{ 'x' in nothing }}", {}),
    ("tests", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ x is not none }} {{ 'a' is lower }} {{ 'A' is upper }} {{ x is sameas 1 }} {{ 2 is in [1, 2] }} {{ range is callable }}", {"x": 1}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ nothing ~ true }}", {}),
    ("arithmetic", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1.5 + 1 }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 'a' + 'b' }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ [1, 2] == [1, 2] }} {{ none == none }} {{ nothing == none }}", {}),
    ("and_or_not", "{{ true and false }} {{ false or 'x' }} {{ not none }} {{ 0 or '' or 'last' }} {{ 'a' and 'b' }} {{ not 1 == 2 }}", {}),
    ("ternary", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if nothing is defined else 2 if true else 3 }}", {}),
    ("string_methods", "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} [{{ '  s  '.strip() }}] [{{ '  s  '.lstrip() }}] [{{ '  s  '.rstrip() }}] {{ 'xxsxx'.strip('x') }} {{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'Ab'.upper() }} {{ 'Ab'.lower() }} {{ 'aXa'.replace('a', 'b') }} {{ 'hello world'.title() }} {{ 'x'.capitalize() }} {{ 'a</think>b'.split('</think>')[-1] }} {{ '-'.join(['1', '2']) }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }}", {}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}", {"d": {"a": 1, "b": "two"}}),
    ("list_dict_literals", "{% set l = [1, [2, 3], {'k': (4, 5)}] %}{{ l[1][0] }}{{ l[2].k[1] }}{{ l | length }}{{ {'a': 1, 'a': 2}.a }}", {}),
    ("range_dict_globals", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ dict(a=1, b='x') }}", {}),
    ("special_vars", "[{{ bos_token }}][{{ eos_token }}][{{ add_generation_prompt }}][{{ tools }}]", {"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True, "tools": None}),
    ("strftime_now", "{{ strftime_now('%Y') | length }}", {}),
    ("generation_tag", "a{% generation %}b{{ 'c' }}{% endgeneration %}d", {}),
    # errors: each must fail in jinja2 and in shardft
    ("error_raise_exception", "{{ raise_exception('roles must alternate') }}", {}),
    ("error_undefined_attribute", "{{ nothing.attr }}", {}),
    ("error_undefined_add", "{{ nothing + 'a' }}", {}),
    ("error_unknown_filter", "{{ 'a' | no_such_filter }}", {}),
    ("error_unknown_test", "{{ 'a' is no_such_test }}", {}),
    ("error_unclosed_block", "{% if true %}never closed", {}),
    ("error_unknown_tag", "{% frobnicate %}", {}),
    ("error_bad_expression", "{{ 1 + }}", {}),
    ("error_type_mismatch", "{{ 'a' + 1 }}", {}),
    ("error_set_attribute_not_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
]

# ---- chat templates written for the tests ----------------------------------------------------------

CHATML_GENERATION = r"""{#- ChatML with generation blocks: the assistant's content and its <|im_end|> take loss. -#}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = 'You are a test assistant.' %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '<|im_start|>system\n' + system_message + '<|im_end|>\n' }}
{%- for message in loop_messages %}
    {%- if message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' }}
        {%- generation %}
            {{- message.content + '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- else %}
        {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

LLAMA3_HEADERS = r"""{{- bos_token }}
{%- set ns = namespace(system='', turns=0) %}
{%- for message in messages if message.role == 'system' %}
    {%- set ns.system = ns.system ~ message.content | trim %}
{%- endfor %}
{%- if ns.system %}
    {{- '<|start_header_id|>system<|end_header_id|>\n\n' ~ ns.system ~ '<|eot_id|>' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role not in ['system', 'user', 'assistant'] %}
        {{- raise_exception('Unknown role: ' ~ message.role) }}
    {%- endif %}
    {%- if message.role != 'system' %}
        {%- set ns.turns = ns.turns + 1 %}
        {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + message.content | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

MISTRAL_INST = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {%- generation %}{{- ' ' + message['content'] + eos_token }}{%- endgeneration %}
    {%- endif %}
{%- endfor %}
"""

GEMMA_MACRO = r"""{#- Gemma-style: the assistant is called model; a system turn is folded into the first user turn. -#}
{%- macro turn(role, content) -%}
<|im_start|>{{ role }}
{{ content | trim }}<|im_end|>
{% endmacro -%}
{{ bos_token if bos_token is defined else '' }}
{%- if messages[0].role == 'system' -%}
    {%- set first_user_prefix = messages[0].content ~ '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = '' -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- set role = 'model' if message.role == 'assistant' else message.role -%}
    {{ turn(role, (first_user_prefix if loop.first else '') ~ message.content) }}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>model
{% endif -%}
"""

PHI_BLOCKS = r"""{% for message in messages %}
    {% if message['role'] == 'system' %}
<|system|>
{{ message['content'] }}<|end|>
    {% elif message['role'] == 'user' %}
<|user|>
{{ message['content'] }}<|end|>
    {% else %}
<|assistant|>
{% generation %}{{ message['content'] }}<|end|>
{% endgeneration %}
    {% endif %}
{% endfor %}
{% if add_generation_prompt %}
<|assistant|>
{% else %}
{{ eos_token }}
{% endif %}
"""

TOOLISH = r"""{%- set tool_list = [{'name': 'get_weather', 'description': 'Weather for a city, in °C', 'parameters': {'city': 'string', 'days': 3, 'ratio': 0.5, 'units': none, 'exact': true}}] -%}
{%- set header -%}
# Tools

{% for tool in tool_list %}
{{ tool | tojson(indent=2) }}
{{ tool | tojson }}
{% endfor %}
{%- endset -%}
<|im_start|>system
{{ header | trim }}
{% for key, value in tool_list[0].parameters.items() %}{{ key | upper }}={{ value | string | lower }}{{ ', ' if not loop.last }}{% endfor %}

{%- if tools is not none %}{{ raise_exception('tools are not used in this test') }}{% endif %}
{%- set sys = messages | selectattr('role', 'equalto', 'system') | list %}
{%- if sys | length > 0 %}

{{ sys[0].content | replace('\n', ' ') | default('none', true) }}
{%- endif %}
<|im_end|>
{% for message in messages %}
    {%- if message.role == 'system' %}{% continue %}{% endif %}
    {%- set content = message.content if message.content is string else message.content | tojson %}
<|im_start|>{{ message.role | capitalize }} ({{ loop.index }}/{{ loop.length }}, {{ loop.revindex }} left)
    {%- if message.role == 'assistant' and content.startswith('CALL ') %}
{"name": {{ content[5:].split(' ')[0] | tojson }}, "arguments": {{ content[5:].split(' ')[1:] | tojson }}}<|im_end|>
    {%- elif message.role == 'assistant' %}
{% generation %}{{ content.strip() }}<|im_end|>{% endgeneration %}
    {%- else %}
{{ content.lstrip().rstrip('?') ~ ('?' if content.endswith('?')) }}<|im_end|>
    {%- endif %}

{% else %}
<|im_start|>user
(empty)<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>Assistant{{ '\n' }}{% endif %}
"""

REASONING = r"""{#- A reasoning-style template: earlier assistant turns lose their <think> part. -#}
{%- set ns = namespace(last_user=-1) %}
{%- for m in messages %}{% if m['role'] == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- message['content'] ~ '\n' }}
    {%- elif message['role'] == 'user' %}
        {{- '<|start_header_id|>user<|end_header_id|>' ~ message['content'] }}
    {%- else %}
        {%- set content = message['content'] %}
        {%- if '</think>' in content %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {{- '<|start_header_id|>assistant<|end_header_id|>' ~ content ~ '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|><think>\n' }}{% endif %}
"""

ZEPHYR_PLAIN = r"""{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

# (name, template, tokenizer.json under this folder, bos_token, eos_token)
TEMPLATES = [
    ("chatml_generation", CHATML_GENERATION, "bpe/qwen2_style/tokenizer.json", None, "<|im_end|>"),
    ("llama3_headers", LLAMA3_HEADERS, "bpe/llama3_style/tokenizer.json", "<|begin_of_text|>", "<|eot_id|>"),
    ("mistral_inst", MISTRAL_INST, "bpe/llama2_metaspace_style/tokenizer.json", "<s>", "</s>"),
    ("gemma_macro", GEMMA_MACRO, "bpe/qwen2_style/tokenizer.json", None, "<|endoftext|>"),
    ("phi_blocks", PHI_BLOCKS, "bpe/llama2_legacy_style/tokenizer.json", "<s>", "</s>"),
    ("toolish", TOOLISH, "bpe/qwen2_style/tokenizer.json", None, "<|im_end|>"),
    ("reasoning", REASONING, "bpe/llama3_style/tokenizer.json", "<|begin_of_text|>", "<|eot_id|>"),
    ("zephyr_plain", ZEPHYR_PLAIN, "bpe/llama2_legacy_style/tokenizer.json", "<s>", "</s>"),
]

CONVERSATIONS = [
    ("single_turn", [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]),
    ("system_multi_turn", [
        {"role": "system", "content": "Be brief.\nAnswer in English."},
        {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"}, {"role": "assistant", "content": "Green, or CALL paint red"}]),
    ("unicode", [{"role": "user", "content": "\u00dcbersetze: \u732b \U0001f431"},
                 {"role": "assistant", "content": "cat \u2014 \uace0\uc591\uc774 \u2713"}]),
    ("whitespace_edges", [
        {"role": "system", "content": "\n sys \t"}, {"role": "user", "content": "  padded question? \n"},
        {"role": "assistant", "content": "\u00a0 answer, inner  spaces kept \r\n"}]),
    ("special_text", [{"role": "user", "content": "say <|im_end|> and <|eot_id|> and </s> literally"},
                      {"role": "assistant", "content": "<think>plan</think>\nok"}]),
    ("tool_call_text", [{"role": "user", "content": "Weather in Paris?"},
                        {"role": "assistant", "content": "CALL get_weather Paris 2"},
                        {"role": "user", "content": "Thanks"}, {"role": "assistant", "content": "<think>x</think>You're welcome."}]),
    ("empty_assistant", [{"role": "user", "content": "Say nothing."}, {"role": "assistant", "content": ""}]),
    ("generation_prompt", [{"role": "system", "content": "You answer in capitals."},
                           {"role": "user", "content": "upper: ab"}, {"role": "assistant", "content": "AB"},
                           {"role": "user", "content": "upper: cd "}]),
    ("roles_not_alternating", [{"role": "user", "content": "one"}, {"role": "user", "content": "two"},
                               {"role": "assistant", "content": "three"}]),
    # NFC (qwen2_style's normalizer) composes these: a token's offsets are those of the composed
    # character's first original code point, so an answer ending in combining marks ends in bytes that
    # no token holds (transformers' mask then runs to the end of the text).
    ("decomposed_accents", [{"role": "user", "content": "Spell u\u0308\u0304 and e\u0301 please"},
                            {"role": "assistant", "content": "Noted: e\u0301 then u\u0308\u0304"}]),
    ("composed_accents", [{"role": "user", "content": "Spell \u01d6 and \u00e9"},
                          {"role": "assistant", "content": "Noted: \u00e9 then \u01d6"}]),
]


def snippet_output(template, variables):
    try:
        return {"output": _compile_jinja_template(template).render(**variables)}
    except Exception as e:  # jinja2's TemplateError, or Python's TypeError from an operator
        return {"error": True, "message": f"{type(e).__name__}: {e}"}


def tokenizer_for(template, tokenizer_json, bos, eos):
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(HERE, tokenizer_json), bos_token=bos, eos_token=eos)
    tok.chat_template = template
    return tok


def mask_from_char_spans(encoding, spans, n):
    """transformers' rule for assistant_masks: tokens from char_to_token(start) to char_to_token(end - 1)."""
    mask = [0] * n
    for start, end in spans:
        start_token = encoding.char_to_token(start)
        end_token = encoding.char_to_token(end - 1)
        if start_token is None:
            break
        for t in range(start_token, end_token + 1 if end_token else n):
            mask[t] = 1
    return mask


def prefix_spans(tok, messages):
    """trl's way without generation blocks: each assistant turn is what its render adds to the prompt."""
    full = tok.apply_chat_template(messages, tokenize=False)
    spans = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before = tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
        upto = tok.apply_chat_template(messages[:i + 1], tokenize=False)
        if not (upto.startswith(before) and full.startswith(upto)):
            return None, i  # the prompt is not a prefix of the turn: no mask this way
        spans.append((len(before), len(upto)))
    return spans, None


def main():
    snippets = [{"name": n, "template": t, "variables": v, **snippet_output(t, v)} for n, t, v in SNIPPETS]
    for s in snippets:
        assert s["name"].startswith("error_") == ("error" in s), s
    os.makedirs(os.path.join(HERE, "jinja"), exist_ok=True)
    templates, cases = [], []
    for name, template, tokenizer_json, bos, eos in TEMPLATES:
        path = f"jinja/{name}.jinja"
        with open(os.path.join(HERE, path), "w", encoding="utf-8") as f:
            f.write(template)
        tok = tokenizer_for(template, tokenizer_json, bos, eos)
        has_generation = "{% generation" in template or "{%- generation" in template
        templates.append({"name": name, "file": path, "tokenizer": tokenizer_json, "bos_token": bos,
                          "eos_token": eos, "generation_blocks": has_generation})
        for conv_name, messages in CONVERSATIONS:
            add_gp = messages[-1]["role"] != "assistant"
            case = {"template": name, "conversation": conv_name, "messages": messages, "add_generation_prompt": add_gp}
            try:
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_gp)
            except TemplateError as e:
                case["error"] = str(e)
                cases.append(case)
                continue
            case["text"] = text
            enc = tok(text, add_special_tokens=False)
            ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_gp)
            assert ids == enc["input_ids"]
            case["ids"] = ids
            if has_generation:
                out = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_gp, return_dict=True,
                                              return_assistant_tokens_mask=True)
                assert out["input_ids"] == ids
                case["mask"] = out["assistant_masks"]
                case["mask_source"] = "return_assistant_tokens_mask"
            elif not add_gp:
                spans, failing_turn = prefix_spans(tok, messages)
                if spans is None:
                    case["prefix_error_turn"] = failing_turn
                else:
                    case["mask"] = mask_from_char_spans(enc, spans, len(ids))
                    case["mask_source"] = "prefix"
            cases.append(case)
    out = {"generator": "tests/reference/make_jinja_chat_fixtures.py", "snippets": snippets,
           "templates": templates, "cases": cases}
    path = os.path.join(HERE, "jinja_chat.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {path}: {len(snippets)} snippets, {len(templates)} templates, {len(cases)} cases "
          f"({sum('error' in c for c in cases)} raise_exception)")


if __name__ == "__main__":
    main()
