/*
 * Unit tests of ipl_jinja: templates rendered end to end against Python's answers (the
 * expected texts below were produced by Jinja2 3.1 configured as transformers configures it:
 * sandboxed, trim_blocks, lstrip_blocks, loop controls, its tojson, raise_exception,
 * strftime_now at 2024-07-26T00:00:00Z), then load-time refusals with their positions,
 * render errors and their codes, limits, and ipl_jinja_uses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_jinja.h"

#define S_NOW 1721952000

typedef struct {
    const char *tpl, *vars, *want;
} s_case_t;

/* template, variables (JSON), Python's rendering */
static const s_case_t s_cases[] = {
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc",
     NULL,
     "a\n  b\nc"},
    {"a {%- if true -%}  b  {%- endif -%} c",
     NULL,
     "abc"},
    {"a\n  {%+ if true %}b{% endif +%}\nc",
     NULL,
     "a\n  b\nc"},
    {"x {{- ' y ' -}} z",
     NULL,
     "x y z"},
    {"{# c #}\nA  {#- c -#}  B\n",
     NULL,
     "AB"},
    {"line\r\nnext\rlast\n",
     NULL,
     "line\nnext\nlast"},
    {"{% raw %}{{ not parsed }}{% endraw %}!",
     NULL,
     "{{ not parsed }}!"},
    {"  {{ 'v' }}\n  {% set x = 1 %}\n{{ x }}",
     NULL,
     "  v\n1"},
    {"{% for i in l %}\n{{ i }}\n{% endfor %}\n",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "3\n1\n2\n"},
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 10 / 2 }}",
     NULL,
     "7 9 64 3 -4 2 3.5 5.0"},
    {"{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 123456.789 }} {{ -0.0 }} {{ 2.5 * 2 }}",
     NULL,
     "1.0 0.30000000000000004 1e+16 1.5e-05 123456.789 -0.0 5.0"},
    {"{{ [1, 'a', none, true, 2.0] }} {{ {'k': 'v', 'n': [1]} }} {{ ('a',) }} {{ (1, 2) }} {{ () }}",
     NULL,
     "[1, 'a', None, True, 2.0] {'k': 'v', 'n': [1]} ('a',) (1, 2) ()"},
    {"{{ \"it's\" }} {{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }} {{ ['tab\\tnl\\n', '\303\274', '\\x07'] }}",
     NULL,
     "it's [\"it's\", 'say \"hi\"', 'both \\' \"'] ['tab\\tnl\\n', '\303\274', '\\x07']"},
    {"{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ 'ab' * 3 }}",
     NULL,
     "a1NoneTrue xy [1, 2] ababab"},
    {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'cat' }} {{ 2 not in l }} {{ 'b' in d }} {{ 1 == 1.0 }} {{ true == 1 }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "True False True False True True True"},
    {"{{ 'yes' if t else 'no' }} {{ 'yes' if z else 'no' }} [{{ 'x' if z }}] {{ z or 'dflt' }} {{ s and n }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "yes no [] dflt 7"},
    {"{{ not z }} {{ not l is defined }} {{ -n|abs }} {{ - 3 }} {{ +n }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "True False 7 -3 7"},
    {"{{ s[0] }}{{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[::2] }} {{ l[-1] }} {{ l[1:] }} {{ l[:-1] }} {{ u[1:3] }} {{ cjk[-2:] }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "Hd ell dlroW olleH HloWrd 2 [1, 2] [3, 1] \303\251l \344\270\226\347\225\214"},
    {"{{ d.b }} {{ d['a'][1] }} {{ d.missing is defined }} {{ l.0 }} {{ d['items'] }} {{ m[1].content }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "1 2 False 3 x hi"},
    {"{{ 'a\\tb' }}|{{ '\\u00e9\\x41\\101' }}|{{ 'a' 'b' }}|{{ 'back\\\\slash' }}|{{ '\\q' }}",
     NULL,
     "a\tb|\303\251AA|ab|back\\slash|\\q"},
    {"{{ 0x1F }} {{ 1_000 }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }}",
     NULL,
     "31 1000 15 5 1500.0"},
    {"{% for k in d %}{{ k }},{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "b,a,items,|b=1;a=[1, 2];items=x;"},
    {"{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }}{{ ',' if not loop.last }}{% else %}none{% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "1/2:3,2/2:2"},
    {"{% for x in [] %}x{% else %}empty{% endfor %}",
     NULL,
     "empty"},
    {"{% for x in l %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.previtem }}{{ loop.nextitem }} {% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "032True1 121False32 210False1 "},
    {"{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     NULL,
     "0134"},
    {"{% for a in [1,2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}",
     NULL,
     "1x1 1y2 1|2x1 2y2 2|"},
    {"{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }} {% if true %}{% set y = 2 %}{% endif %}{{ y }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "1 2"},
    {"{% set ns = namespace(c=0, s='') %}{% for i in l %}{% set ns.c = ns.c + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.c }} {{ ns.s }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "6 312"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = (1, 2) %}{{ t }}",
     NULL,
     "12 (1, 2)"},
    {"{% set block | upper %}hello {{ s }}{% endset %}[{{ block }}]",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "[HELLO HELLO WORLD]"},
    {"{% if n > 10 %}big{% elif n > 5 %}mid{% elif n > 1 %}small{% else %}tiny{% endif %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "mid"},
    {"{% macro m(a, b='B', c=none) %}<{{ a }}|{{ b }}|{{ c }}>{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m(a='x', b='y') }}",
     NULL,
     "<1|B|None><1|2|None><1|B|3><x|y|None>"},
    {"{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}",
     NULL,
     "(1, 2){'k': 3}"},
    {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ s }}{% endcall %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "<b>bold Hello World</b>"},
    {"{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each(l) %}[{{ item }}]{% endcall %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "[3][1][2]"},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
     NULL,
     "120"},
    {"{% filter upper %}abc {{ s }}{% endfilter %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "ABC HELLO WORLD"},
    {"{% generation %}gen {{ n }}{% endgeneration %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "gen 7"},
    {"{{ strftime_now('%Y-%m-%d %d %b %Y') }}",
     NULL,
     "2024-07-26 26 Jul 2024"},
    {"{% for i in l %}{{ x is defined }}{% set x = i %}{{ x }} {% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "False3 False1 False2 "},
    {"{% set x = 'out' %}{% for i in l %}{{ x }}{% set x = i %}{% endfor %} {{ x }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "outoutout out"},
    {"{% for i in l %}{% break %}{% else %}else-after-break{% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "else-after-break"},
    {"{% for i in l %}{% continue %}{% else %}else-after-continue{% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "else-after-continue"},
    {"{% for i in l %}{% if i > 1 %}{% continue %}{% endif %}{{ i }}{% else %}no{% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "1"},
    {"{% for o in [1] %}{% for i in [] %}{% else %}{{ loop.index }}{{ i is defined }}{% endfor %}{% endfor %}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "1False"},
    {"{% filter upper %}{% set y = 1 %}{% endfilter %}{{ y is defined }} {% set b %}{% set z = 2 %}{% endset %}{{ z is defined }}",
     NULL,
     "False False"},
    {"{% set ns = namespace(n=0) %}{% for i in l %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "6"},
    {"{% macro m() %}{{ x }}{% endmacro %}{% set x = 'top' %}{{ m() }}",
     NULL,
     "top"},
    {"{{ [1, 2]|select|first }} {{ [3, 4]|map('string')|join('+') }} {{ none|map('upper')|list }} {{ [1]|reverse|list }}",
     NULL,
     "1 3+4 [] [1]"},
    {"{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 5 }} {{ 'x=%r' % 'q' }} {{ '' % [] }}",
     NULL,
     "a and b 5% x='q' "},
    {"{{ 2.675|round(2) }} {{ 7|round }} {{ 0.125|round(2) }} {{ -1.5|round }} {{ 3.0 is odd }} {{ 4.0 is divisibleby 2 }}",
     NULL,
     "2.67 7 0.12 -2.0 True True"},
    {"{{ s|upper }} {{ s|lower }} {{ 'hello-world foo(bar) they\\'re 3rd'|title }} {{ 'hELLO wORLD'|capitalize }} {{ u|upper }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "HELLO WORLD hello world Hello-World Foo(Bar) They're 3rd Hello world H\303\211LLO W\303\226RLD SS"},
    {"[{{ '  x y  '|trim }}] [{{ 'xxhixx'|trim('x') }}] {{ s|length }} {{ u|length }} {{ l|length }} {{ d|count }} {{ undefined_var|length }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "[x y] [hi] 11 13 3 3 0"},
    {"{{ s|replace('o', '0') }} {{ s|replace('o', '0', 1) }} {{ 'abc'|replace('', '-') }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "Hell0 W0rld Hell0 World -a-b-c-"},
    {"{{ l|join(', ') }} {{ m|map(attribute='role')|join('/') }} {{ 'abc'|join('.') }} {{ [1, none, true]|join }} {{ m|join(',', attribute='role') }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "3, 1, 2 system/user/assistant/user a.b.c 1NoneTrue system,user,assistant,user"},
    {"{{ undefined_var|default('D') }} {{ z|default('D') }} {{ e|default('D', true) }} {{ s|d('x') }} {{ none|default('D', boolean=true) }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "D None D Hello World D"},
    {"{{ d|items|list }} {{ d|dictsort }} {{ l|first }} {{ l|last }} {{ s|first }} {{ []|first is defined }} {{ l|sort }} {{ l|sort(reverse=true) }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "[('b', 1), ('a', [1, 2]), ('items', 'x')] [('a', [1, 2]), ('b', 1), ('items', 'x')] 3 2 H False [1, 2, 3] [3, 2, 1]"},
    {"{{ m|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ m|rejectattr('content')|list|length }} {{ m|selectattr('content', 'none')|list|length }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "['hi', ' bye '] 1 1"},
    {"{{ l|select('odd')|list }} {{ l|reject('even')|list }} {{ [1, 0, '', 'a']|select|list }} {{ l|map('string')|join }} {{ ['a', 'b']|map('upper')|list }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "[3, 1] [3, 1] [1, 'a'] 312 ['A', 'B']"},
    {"{{ '42'|int }} {{ ' 7 '|int }} {{ '4.9'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.99|int }} {{ '0x1f'|int(0, 16) }} {{ '2.5'|float }} {{ 'x'|float }} {{ true|int }}",
     NULL,
     "42 7 4 0 5 3 31 2.5 0.0 1"},
    {"{{ l|string }} {{ 5|string }} {{ none|string }} {{ l|list }} {{ 'ab'|list }} {{ l|sum }} {{ l|min }} {{ l|max }} {{ ['b', 'A', 'a']|unique|list }} {{ ['b', 'A', 'c']|sort }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "[3, 1, 2] 5 None [3, 1, 2] ['a', 'b'] 6 1 3 ['b', 'A'] ['A', 'b', 'c']"},
    {"{{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(method='ceil') }} {{ -2.5|abs }} {{ 'a<b>&\"'|e }} {{ '<x>'|safe }} {{ l|reverse|list }} {{ 'abc'|reverse }}",
     "{\"l\": [1, 2]}",
     "2.0 4.0 2.57 3.0 2.5 a&lt;b&gt;&amp;&#34; <x> [2, 1] cba"},
    {"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width='> ', blank=true) }}",
     NULL,
     "a\n    b\n\n    c|  a\n  b|a\n> \n> b"},
    {"{{ '%s-%d'|format('x', 3) }} {{ 'one two  three'|wordcount }}",
     NULL,
     "x-3 3"},
    {"{{ d|tojson }}|{{ m[:2]|tojson(indent=2) }}|{{ u|tojson }}|{{ u|tojson(ensure_ascii=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1.0, 0.5, none, false]|tojson }}|{{ 'q\"\\\\\\n\\t\\x01'|tojson }}|{{ []|tojson(indent=2) }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "{\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}|[\n  {\n    \"role\": \"system\",\n    \"content\": \"sys\"\n  },\n  {\n    \"role\": \"user\",\n    \"content\": \"hi\"\n  }\n]|\"h\303\251llo w\303\266rld \303\237\"|\"h\\u00e9llo w\\u00f6rld \\u00df\"|{\"b\":1,\"a\":[1,2],\"items\":\"x\"}|{\"a\": 2, \"b\": 1}|[1.0, 0.5, null, false]|\"q\\\"\\\\\\n\\t\\u0001\"|[]"},
    {"{{ n is number }}{{ t is number }}{{ f is float }}{{ n is integer }}{{ t is integer }}{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ s is iterable }}{{ d is sequence }}{{ n is iterable }}{{ z is none }}{{ t is boolean }}{{ t is true }}{{ z is false }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "TrueTrueTrueTrueFalseTrueTrueTrueTrueTrueFalseTrueTrueTrueFalse"},
    {"{{ n is odd }}{{ n is even }}{{ 9 is divisibleby 3 }}{{ n is eq 7 }}{{ n is equalto(7) }}{{ n is ne 7 }}{{ n is gt 5 }}{{ n is lt 5 }}{{ n is ge 7 }}{{ n is le 6 }}{{ 2 is in l }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ undefined_var is undefined }}{{ s is not defined }}{{ z is sameas none }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "TrueFalseTrueTrueTrueFalseTrueFalseTrueFalseTrueTrueTrueTrueFalseTrue"},
    {"{{ [] | select is defined }} {% if [] | select %}gen-truthy{% endif %} {% if [] | select | list %}no{% else %}empty-list{% endif %}",
     NULL,
     "True gen-truthy empty-list"},
    {"{{ s.startswith('He') }}{{ s.endswith(('x', 'ld')) }} {{ s.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ '  a  b '.split() }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "TrueTrue ['Hello', 'World'] ['a', 'b', '', 'c'] ['a', 'b c'] ['a b', 'c'] ['a', 'b']"},
    {"[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ '\\n\\nx\\n'.strip('\\n') }}][{{ 'xyhiyx'.strip('xy') }}]",
     NULL,
     "[x][x  ][  x][x][hi]"},
    {"{{ s.upper() }} {{ s.lower() }} {{ \"they're bill's\".title() }} {{ 'abc'.capitalize() }} {{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('l') }} {{ u.find('w') }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "HELLO WORLD hello world They'Re Bill'S Abc HeLLo WorLd HeLLo World 4 7 -1 3 6"},
    {"{{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'two') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=5) }} {{ '{{}}'.format() }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'ab'.islower() }}{{ 'AB'.isupper() }}",
     NULL,
     "a-b 1 and two aba 5! {} ['a', 'b', 'c'] TrueTrueTrueTrueTrue"},
    {"{{ d.get('b') }} {{ d.get('x') }} {{ d.get('x', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ l.index(2) }} {{ l.count(3) }} {{ d.items is defined }}",
     "{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, 2], \"items\": \"x\"}, \"m\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null}, {\"role\": \"user\", \"content\": \" bye \"}], \"u\": \"h\303\251llo w\303\266rld \303\237\", \"e\": \"\", \"t\": true, \"z\": null, \"cjk\": \"\344\275\240\345\245\275 \344\270\226\347\225\214\"}",
     "1 None dflt ['b', 'a', 'items'] [1, [1, 2], 'x'] 2 1 True"},
    {"{{ dict(a=1, b=2) }} {{ namespace(a=1).a }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(3, 0, -1)|list }}",
     NULL,
     "{'a': 1, 'b': 2} 1 [0, 1, 2] [1, 4, 7] [3, 2, 1]"},
};

/* Renders tpl with vars (JSON or NULL); returns the code, *out the text (caller frees). */
static int s_render(const char *tpl, const char *vars, const ipl_jinja_limits_t *lim, char **out,
                    char *err, size_t errlen)
{
    char lerr[256];
    ipl_jinja_t *t = ipl_jinja_new(tpl, strlen(tpl), lerr, sizeof lerr);
    if (!t) fail_msg("load of %s failed: %s", tpl, lerr);
    cJSON *v = vars ? cJSON_Parse(vars) : NULL;
    if (vars) assert_non_null(v);
    ipl_jinja_limits_t l = lim ? *lim : (ipl_jinja_limits_t){0};
    l.now = S_NOW;
    size_t len = 0;
    int rc = ipl_jinja_render(t, v, &l, out, &len, err, errlen);
    if (rc == 0) assert_int_equal(len, strlen(*out));
    cJSON_Delete(v);
    ipl_jinja_destroy(&t);
    assert_null(t);
    return rc;
}

static void test_python_parity(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    size_t bad = 0;
    for (size_t i = 0; i < sizeof s_cases / sizeof *s_cases; i++) {
        char *out = NULL, err[512] = "";
        int rc = s_render(s_cases[i].tpl, s_cases[i].vars, NULL, &out, err, sizeof err);
        if (rc != 0) {
            print_message("case %zu: %s\n  error %d: %s\n", i, s_cases[i].tpl, rc, err);
            bad++;
        } else if (strcmp(out, s_cases[i].want) != 0) {
            print_message("case %zu: %s\n  got  [%s]\n  want [%s]\n", i, s_cases[i].tpl, out,
                          s_cases[i].want);
            bad++;
        }
        free(out);
    }
    assert_int_equal(bad, 0);
}

static void s_load_error(const char *tpl, const char *want)
{
    char err[256] = "";
    ipl_jinja_t *t = ipl_jinja_new(tpl, strlen(tpl), err, sizeof err);
    if (t) fail_msg("%s loaded; expected: %s", tpl, want);
    if (strcmp(err, want) != 0) fail_msg("%s:\n  got  %s\n  want %s", tpl, err, want);
}

static void test_load_errors(void **state)
{
    (void)state;
    s_load_error("{{ x | frobnicate }}", "1:8: unknown filter 'frobnicate'");
    s_load_error("{% if x is shiny %}{% endif %}", "1:12: unknown test 'shiny'");
    s_load_error("ab\n  {{ x.encode('utf-8') }}", "2:8: unsupported method 'encode()'");
    s_load_error("{{ lipsum(3) }}", "1:4: unknown function 'lipsum' (not a macro of this "
                                    "template nor a supported global)");
    s_load_error("{% include 'other.j2' %}", "1:4: unsupported statement 'include'");
    s_load_error("{% extends 'base' %}", "1:4: unsupported statement 'extends'");
    s_load_error("{% for x in y recursive %}{% endfor %}", "1:15: recursive loops are not supported");
    s_load_error("{{ f(*args) }}", "1:6: *args and **kwargs in calls are not supported");
    s_load_error("{% if x %}", "1:11: unexpected end of template: expected {% elif %}");
    s_load_error("{% for x in y %}{% endif %}", "1:20: unexpected {% endif %} (expected {% endfor %})");
    s_load_error("{{ x ", "1:1: unexpected end of template: this tag is not closed with '}}'");
    s_load_error("{# never closed", "1:1: unterminated comment: '{#' without '#}'");
    s_load_error("{{ 'abc }}", "1:4: unterminated string literal");
    s_load_error("{{ '\\x4' }}", "1:8: truncated \\x escape in a string literal");
    s_load_error("{{ a $ b }}", "1:6: unexpected character '$' in a tag");
    s_load_error("{{ 1 + }}", "1:8: unexpected '}}'");
    s_load_error("{% macro m(a=1, b) %}{% endmacro %}", "1:17: a parameter without default after one with");
    s_load_error("{% endfor %}", "1:4: unexpected {% endfor %}");
    s_load_error("{% else %}", "1:4: unexpected {% else %}");
    s_load_error("{{ x is defined is defined }}", "1:17: you cannot chain multiple tests with 'is'");
    /* nesting is bounded, not a stack overflow */
    char deep[2048];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
    for (int i = 0; i < 500; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 500; i++) deep[n++] = ')';
    n += (size_t)snprintf(deep + n, sizeof deep - n, " }}");
    char err[256];
    assert_null(ipl_jinja_new(deep, n, err, sizeof err));
    assert_non_null(strstr(err, "nested too deeply"));
    /* no text is an empty template */
    ipl_jinja_t *empty = ipl_jinja_new(NULL, 0, NULL, 0);
    assert_non_null(empty);
    char *out;
    assert_int_equal(ipl_jinja_render(empty, NULL, NULL, &out, NULL, NULL, 0), 0);
    assert_string_equal(out, "");
    free(out);
    ipl_jinja_destroy(&empty);
}

static void s_render_error(const char *tpl, const char *vars, int want_rc, const char *want)
{
    char *out = NULL, err[256] = "";
    int rc = s_render(tpl, vars, NULL, &out, err, sizeof err);
    if (rc == 0) fail_msg("%s rendered [%s]; expected: %s", tpl, out, want);
    assert_null(out);
    if (rc != want_rc || strcmp(err, want) != 0)
        fail_msg("%s:\n  got  %d %s\n  want %d %s", tpl, rc, err, want_rc, want);
}

static void test_render_errors(void **state)
{
    (void)state;
    /* raise_exception: the template's message verbatim, IPL_E_INVAL */
    s_render_error("{{ raise_exception('Roles must alternate ' ~ 2) }}", NULL, IPL_E_INVAL,
                   "Roles must alternate 2");
    /* what Python refuses */
    s_render_error("{{ 'a' + 1 }}", NULL, IPL_E_TYPE,
                   "1:8: unsupported operand type(s) for +: 'str' and 'int'");
    s_render_error("{{ x.y }}", NULL, IPL_E_TYPE, "1:6: 'x' is undefined");
    s_render_error("{{ x.y.z }}", "{\"x\": {}}", IPL_E_TYPE,
                   "1:8: an attribute or item of an undefined value was accessed");
    s_render_error("{{ 1 / 0 }}", NULL, IPL_E_TYPE, "1:6: division by zero");
    s_render_error("{{ 1 < 'a' }}", NULL, IPL_E_TYPE,
                   "1:4: '<' not supported between instances of 'int' and 'str'");
    s_render_error("{{ 1 in 'abc' }}", NULL, IPL_E_TYPE,
                   "1:4: 'in <string>' requires a string as left operand, not int");
    s_render_error("{% for x in 5 %}{% endfor %}", NULL, IPL_E_TYPE, "1:13: 'int' object is not iterable");
    s_render_error("{{ [1]|select|length }}", NULL, IPL_E_TYPE,
                   "1:15: object of type 'generator' has no len()");
    s_render_error("{{ [1]|map('string') }}", NULL, IPL_E_TYPE, "1:1: cannot print a generator");
    s_render_error("{{ 'ǅ'|upper }}", NULL, IPL_E_TYPE,
                   "1:8: case mapping of U+01C5 is not supported (only ASCII, Latin, Greek and "
                   "Cyrillic letters are)");
    s_render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, IPL_E_TYPE,
                   "1:34: macro 'm' takes not more than 1 argument(s)");
    s_render_error("{% set x = 1 %}{% set x.a = 2 %}", NULL, IPL_E_TYPE,
                   "1:25: cannot assign attribute on non-namespace object");
    s_render_error("{{ x|tojson }}", NULL, IPL_E_TYPE,
                   "1:6: tojson: object of type Undefined (or inside it) is not JSON serializable");
    s_render_error("{{ 'ab' % 1 }}", NULL, IPL_E_TYPE,
                   "1:9: format: not all arguments converted during string formatting");
    s_render_error("{{ '%x' % 1 }}", NULL, IPL_E_TYPE,
                   "1:9: format: only %s, %d, %i, %r and %% are supported");
    s_render_error("{{ 9223372036854775807 + 1 }}", NULL, IPL_E_RANGE,
                   "1:24: integer overflow in '+' (Python integers are unbounded; this engine's are 64-bit)");
}

static void test_limits(void **state)
{
    (void)state;
    char *out = NULL, err[256];
    ipl_jinja_limits_t lim = {.max_output = 1000};
    assert_int_equal(s_render("{% for i in range(100) %}0123456789abcdef{% endfor %}", NULL, &lim,
                              &out, err, sizeof err), IPL_E_RANGE);
    assert_string_equal(err, "1:26: the rendered text exceeds 1000 bytes");
    lim = (ipl_jinja_limits_t){.max_iterations = 50};
    assert_int_equal(s_render("{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}",
                              NULL, &lim, &out, err, sizeof err), IPL_E_RANGE);
    assert_non_null(strstr(err, "more than 50 loop iterations"));
    lim = (ipl_jinja_limits_t){.max_call_depth = 10};
    assert_int_equal(s_render("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", NULL, &lim,
                              &out, err, sizeof err), IPL_E_RANGE);
    assert_non_null(strstr(err, "macro calls nested deeper than 10"));
    lim = (ipl_jinja_limits_t){.max_memory = 1 << 20};
    assert_int_equal(s_render("{% set ns = namespace(s='x') %}{% for i in range(100000) %}"
                              "{% set ns.s = ns.s ~ i %}{% endfor %}", NULL, &lim, &out, err,
                              sizeof err), IPL_E_RANGE);
    assert_non_null(strstr(err, "more than 1048576 bytes of memory"));
    /* repetition is bounded by the output limit before it allocates */
    lim = (ipl_jinja_limits_t){.max_output = 4096};
    assert_int_equal(s_render("{{ 'x' * 100000000000 }}", NULL, &lim, &out, err, sizeof err),
                     IPL_E_RANGE);
    assert_int_equal(s_render("{{ range(100000000000)|length }}", NULL, &lim, &out, err, sizeof err),
                     IPL_E_TYPE);
    /* a render after an error works (no state leaks between renders) */
    assert_int_equal(s_render("{{ 1 + 1 }}", NULL, NULL, &out, err, sizeof err), 0);
    assert_string_equal(out, "2");
    free(out);
}

static void test_reuse_and_uses(void **state)
{
    (void)state;
    const char *src = "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
                      "{% if enable_thinking is defined and not enable_thinking %}/no{% endif %}";
    char err[256];
    ipl_jinja_t *t = ipl_jinja_new(src, strlen(src), err, sizeof err);
    assert_non_null(t);
    assert_true(ipl_jinja_uses(t, "messages"));
    assert_true(ipl_jinja_uses(t, "enable_thinking"));
    assert_false(ipl_jinja_uses(t, "tools"));
    assert_false(ipl_jinja_uses(t, "m.role"));
    /* one parse, many renders with different variables */
    for (int i = 0; i < 3; i++) {
        char vars[256];
        snprintf(vars, sizeof vars,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"n%d\"}]%s}", i,
                 i == 1 ? ", \"enable_thinking\": false" : "");
        cJSON *v = cJSON_Parse(vars);
        char *out;
        size_t len;
        assert_int_equal(ipl_jinja_render(t, v, NULL, &out, &len, err, sizeof err), 0);
        char want[64];
        snprintf(want, sizeof want, "user:n%d;%s", i, i == 1 ? "/no" : "");
        assert_string_equal(out, want);
        free(out);
        cJSON_Delete(v);
    }
    /* variables that are not an object are ignored; NULL out is refused */
    char *out;
    assert_int_equal(ipl_jinja_render(t, NULL, NULL, &out, NULL, err, sizeof err), 0);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(ipl_jinja_render(t, NULL, NULL, NULL, NULL, err, sizeof err), IPL_E_INVAL);
    ipl_jinja_destroy(&t);
    ipl_jinja_destroy(&t); /* NULL-safe */
    ipl_jinja_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_parity), cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_render_errors), cmocka_unit_test(test_limits),
        cmocka_unit_test(test_reuse_and_uses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
