#!/usr/bin/env node
// node_bench.mjs — encode throughput of Hugging Face's Rust tokenizers
// (npm `tokenizers`, the official Node binding) on the same text and the same
// documents as gotpu's BenchmarkEncode (data/tokenizer/bench_test.go).
//
//   node node_bench.mjs --text FILE --tokenizers DIR [--names gpt2,mistral-7b] [--rounds 3]
//
// DIR holds <name>/tokenizer.json or <name>/tokenizer.json.gz. FILE is the text
// the Go benchmark dumped (GOTPU_BENCH_DUMP). Documents are the text cut at
// blank lines, as in the Go benchmark. Prints one line per measurement:
//   node <name> sequential|batch tokens=N seconds=S tokens_per_s=R tokens_per_round=T
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const version = require('tokenizers/package.json').version;

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const textFile = opt('text');
const dir = opt('tokenizers');
if (!textFile || !dir) {
  console.error('usage: node node_bench.mjs --text FILE --tokenizers DIR [--names a,b] [--rounds N]');
  process.exit(2);
}
const names = opt('names', 'gpt2,mistral-7b').split(',');
const rounds = Number(opt('rounds', '3'));

const text = fs.readFileSync(textFile, 'utf8');
const docs = text.split('\n\n').filter((d) => d.length > 0);

function load(name) {
  const plain = path.join(dir, name, 'tokenizer.json');
  if (fs.existsSync(plain)) return Tokenizer.fromFile(plain);
  const gz = fs.readFileSync(plain + '.gz');
  return Tokenizer.fromString(zlib.gunzipSync(gz).toString('utf8'));
}

const report = (name, mode, tokens, seconds) =>
  console.log(
    `node ${name} ${mode} tokens=${tokens} seconds=${seconds.toFixed(3)} tokens_per_s=${Math.round(tokens / seconds)} tokens_per_round=${tokens / rounds}`,
  );

console.error(`tokenizers@${version}, ${docs.length} documents, ${Buffer.byteLength(text)} bytes`);
for (const name of names) {
  const tk = load(name);
  await tk.encode('warm up', null, { addSpecialTokens: false });
  // Sequential: one document at a time, as the Go benchmark's Encode loop.
  let tokens = 0;
  let t0 = process.hrtime.bigint();
  for (let r = 0; r < rounds; r++) {
    for (const d of docs) {
      const e = await tk.encode(d, null, { addSpecialTokens: false });
      tokens += e.getIds().length;
    }
  }
  report(name, 'sequential', tokens, Number(process.hrtime.bigint() - t0) / 1e9);
  // Batch: all documents in one encodeBatch call (Rust uses all cores).
  tokens = 0;
  t0 = process.hrtime.bigint();
  for (let r = 0; r < rounds; r++) {
    const es = await tk.encodeBatch(docs, { addSpecialTokens: false });
    for (const e of es) tokens += e.getIds().length;
  }
  report(name, 'batch', tokens, Number(process.hrtime.bigint() - t0) / 1e9);
}
