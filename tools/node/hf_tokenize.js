#!/usr/bin/env node
// The reference tokenizer of integration/test_tokenizer_parity.py: @lenml/tokenizers (a
// transformers.js fork) loading a Hugging Face tokenizer.json (+ the tokenizer_config.json
// next to it, when there is one).
//
//   node tools/node/hf_tokenize.js --tokenizer FILE [--add-special-tokens] [--decode]
//
// stdin: one JSON value per line, a string to encode (or, with --decode, an array of ids);
// stdout: one JSON line per input line, the array of ids (or the decoded string).
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");
const { TokenizerLoader } = require("@lenml/tokenizers");

function usage(msg) {
  process.stderr.write(`hf_tokenize: ${msg}\n` +
    "usage: hf_tokenize.js --tokenizer FILE [--add-special-tokens] [--decode]\n");
  process.exit(2);
}

let file = null, addSpecial = false, decode = false;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--tokenizer" && i + 1 < args.length) file = args[++i];
  else if (args[i] === "--add-special-tokens") addSpecial = true;
  else if (args[i] === "--decode") decode = true;
  else usage(`unknown argument '${args[i]}'`);
}
if (!file) usage("--tokenizer is required");

const tokenizerJSON = JSON.parse(fs.readFileSync(file, "utf8"));
const configPath = path.join(path.dirname(file), "tokenizer_config.json");
const tokenizerConfig = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on("line", (line) => {
  const v = JSON.parse(line);
  let r;
  if (!decode) r = tok.encode(v, { add_special_tokens: addSpecial });
  else if (v.length === 0) r = ""; // the library refuses an empty array
  else r = tok.decode(v, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  out.push(JSON.stringify(r));
});
rl.on("close", () => process.stdout.write(out.length ? out.join("\n") + "\n" : ""));
