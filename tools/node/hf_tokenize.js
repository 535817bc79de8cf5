#!/usr/bin/env node
// The reference tokenizer of integration/test_tokenizer_parity.py, loading a Hugging Face
// tokenizer.json. Two references, the first found wins unless --reference names one:
//   - "hf": Hugging Face's own `tokenizers` library (the Rust crate vLLM runs, through its
//     official Node.js binding, npm package `tokenizers`, which ships the compiled crate):
//     from tools/node/node_modules, or the package directory named by $IPL_HF_TOKENIZERS;
//   - "lenml": @lenml/tokenizers (a transformers.js fork, pure JavaScript: its regexes are
//     JavaScript's, whose \s differs from Oniguruma's on U+0085 and U+FEFF), loading the
//     tokenizer_config.json next to the file too, when there is one.
//
//   node tools/node/hf_tokenize.js --tokenizer FILE [--add-special-tokens] [--decode]
//                                  [--reference hf|lenml] [--which]
//
// stdin: one JSON value per line, a string to encode (or, with --decode, an array of ids);
// stdout: one JSON line per input line, the array of ids (or the decoded string).
// --which prints the reference that would be used ("hf tokenizers 0.23.2" or "lenml ...").
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");

function usage(msg) {
  process.stderr.write(`hf_tokenize: ${msg}\n` +
    "usage: hf_tokenize.js --tokenizer FILE [--add-special-tokens] [--decode] " +
    "[--reference hf|lenml] [--which]\n");
  process.exit(2);
}

let file = null, addSpecial = false, decode = false, reference = null, which = false;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--tokenizer" && i + 1 < args.length) file = args[++i];
  else if (args[i] === "--add-special-tokens") addSpecial = true;
  else if (args[i] === "--decode") decode = true;
  else if (args[i] === "--reference" && i + 1 < args.length) reference = args[++i];
  else if (args[i] === "--which") which = true;
  else usage(`unknown argument '${args[i]}'`);
}
if (reference !== null && reference !== "hf" && reference !== "lenml")
  usage(`--reference must be hf or lenml, not '${reference}'`);

// The official binding's directory, or null.
function hfDir() {
  const candidates = [process.env.IPL_HF_TOKENIZERS, path.join(__dirname, "node_modules", "tokenizers")];
  for (const dir of candidates)
    if (dir && fs.existsSync(path.join(dir, "package.json"))) return dir;
  return null;
}

const dir = hfDir();
if (reference === null) reference = dir ? "hf" : "lenml";
if (reference === "hf" && !dir)
  usage("--reference hf: npm package `tokenizers` not found in tools/node/node_modules " +
        "(or set IPL_HF_TOKENIZERS to its directory)");
if (which) {
  const pkg = reference === "hf" ? path.join(dir, "package.json")
    : path.join(__dirname, "node_modules", "@lenml", "tokenizers", "package.json");
  process.stdout.write(`${reference} ${JSON.parse(fs.readFileSync(pkg, "utf8")).version}\n`);
  process.exit(0);
}
if (!file) usage("--tokenizer is required");

// Both references behind one interface: encode(text) and decode(ids) return promises.
function loadHF() {
  const { Tokenizer } = require(dir);
  const tok = Tokenizer.fromFile(file);
  return {
    encode: async (text) => (await tok.encode(text, null, { addSpecialTokens: addSpecial })).getIds(),
    decode: (ids) => tok.decode(ids, false),
  };
}

function loadLenml() {
  const { TokenizerLoader } = require("@lenml/tokenizers");
  const tokenizerJSON = JSON.parse(fs.readFileSync(file, "utf8"));
  const configPath = path.join(path.dirname(file), "tokenizer_config.json");
  const tokenizerConfig = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  return {
    encode: async (text) => tok.encode(text, { add_special_tokens: addSpecial }),
    decode: async (ids) => ids.length === 0 ? "" // the library refuses an empty array
      : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
  };
}

const tok = reference === "hf" ? loadHF() : loadLenml();
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const lines = [];
rl.on("line", (line) => lines.push(line));
rl.on("close", async () => {
  const out = [];
  for (const line of lines) {
    const v = JSON.parse(line);
    out.push(JSON.stringify(decode ? await tok.decode(v) : await tok.encode(v)));
  }
  process.stdout.write(out.length ? out.join("\n") + "\n" : "");
});
