#!/usr/bin/env node
// Encode throughput of Hugging Face's own tokenizers (the Rust crate, through its official
// Node.js binding, npm package `tokenizers`, from tools/node/node_modules or $IPL_HF_TOKENIZERS)
// on the same files as `inferplanectl tokenize --bench`, for docs/benchmarks.md:
//
//   node tools/node/hf_bench.js --tokenizer FILE TEXT...
//
// For each TEXT: "cold" is the first encode by a tokenizer just loaded from FILE (its BPE word
// cache empty), "warm" the median of repeated encodes of the same text for about a second (the
// word cache filled). Times are the process's CPU time (process.cpuUsage: the encode runs on
// a libuv worker thread, which counts) and wall time, one call at a time. One JSON line per
// figure.
"use strict";
const fs = require("fs");
const path = require("path");

function usage(msg) {
  process.stderr.write(`hf_bench: ${msg}\nusage: hf_bench.js --tokenizer FILE TEXT...\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let file = null;
const texts = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--tokenizer" && i + 1 < args.length) file = args[++i];
  else texts.push(args[i]);
}
if (!file || texts.length === 0) usage("--tokenizer and at least one TEXT are required");
const dirs = [process.env.IPL_HF_TOKENIZERS, path.join(__dirname, "node_modules", "tokenizers")];
const dir = dirs.find((d) => d && fs.existsSync(path.join(d, "package.json")));
if (!dir) usage("npm package `tokenizers` not found (make deps, or set IPL_HF_TOKENIZERS)");
const { Tokenizer } = require(dir);
const version = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;

function cpuS() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function timed(tok, text) {
  const c0 = cpuS(), w0 = process.hrtime.bigint();
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  return { cpu: cpuS() - c0, wall: Number(process.hrtime.bigint() - w0) / 1e9,
           n: enc.getIds().length };
}

(async () => {
  for (const t of texts) {
    const text = fs.readFileSync(t, "utf8");
    const bytes = Buffer.byteLength(text, "utf8");
    const tok = Tokenizer.fromFile(file); // fresh: an empty word cache
    const cold = await timed(tok, text);
    const runs = [];
    const start = cpuS();
    while (runs.length < 10000 && cpuS() - start < 1.0) runs.push(await timed(tok, text));
    runs.sort((a, b) => a.cpu - b.cpu);
    const warm = runs[Math.floor(runs.length / 2)];
    for (const [name, r] of [["hf_cold", cold], ["hf_warm", warm]])
      process.stdout.write(JSON.stringify({
        name, text: path.basename(t), reference: `tokenizers ${version}`, bytes, tokens: r.n,
        cpu_us: +(r.cpu * 1e6).toFixed(1), wall_us: +(r.wall * 1e6).toFixed(1),
        mb_per_cpu_s: +(bytes / r.cpu / 1e6).toFixed(2),
        mb_per_wall_s: +(bytes / r.wall / 1e6).toFixed(2), rounds: name === "hf_warm" ? runs.length : 1,
      }) + "\n");
  }
})();
