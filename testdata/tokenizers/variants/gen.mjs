#!/usr/bin/env node
// gen.mjs — reference outputs of Hugging Face tokenizers (npm tokenizers@0.23.2,
// the official Node binding of the Rust library) for the variant tokenizers of
// recipes.json, written to expected.jsonl.gz. Works offline.
//
//   cp -r testdata/tokenizers /tmp/tok && cd /tmp/tok/variants && npm ci && node gen.mjs
//   cp /tmp/tok/variants/expected.jsonl.gz <repo>/testdata/tokenizers/variants/
//
// One line per variant ({"variant", "meta"}) then one per input
// ({"variant", "text", "text_pair", "encode", "encode_special", "decode", ...}),
// and for recipes padding to the longest in a batch, one
// {"variant", "batch", "batch_encodings" | "batch_error"} line.
// An encoding that fails is recorded as {"error": message}.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const VERSION = require('tokenizers/package.json').version;

const recipes = JSON.parse(fs.readFileSync(path.join(HERE, 'recipes.json'), 'utf8'));

// Build a variant exactly as the Go test does (variants_test.go).
function build(r) {
  const doc = r.base
    ? JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(HERE, '..', r.base, 'tokenizer.json.gz'))).toString('utf8'))
    : {};
  for (const [k, v] of Object.entries(r.set || {})) doc[k] = v;
  if (r.model_file) doc.model = JSON.parse(fs.readFileSync(path.join(HERE, r.model_file), 'utf8'));
  for (const [k, v] of Object.entries(r.model_set || {})) doc.model[k] = v;
  for (const k of r.model_delete || []) delete doc.model[k];
  return JSON.stringify(doc);
}

function inputs() {
  const corpus = fs
    .readFileSync(path.join(HERE, '..', 'corpus.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l).text);
  const texts = corpus.filter((_, i) => i % recipes.corpus_every === 0).concat(recipes.extra_texts);
  return { texts, pairs: recipes.pairs };
}

function fields(e) {
  return {
    ids: e.getIds(),
    tokens: e.getTokens(),
    offsets: e.getOffsets(),
    word_ids: e.getWordIds().map((w) => (w === undefined ? null : w)),
    type_ids: e.getTypeIds(),
    special_tokens_mask: e.getSpecialTokensMask(),
    attention_mask: e.getAttentionMask(),
    sequence_ids: e.getSequenceIds().map((s) => (s === undefined ? null : s)),
    overflowing: e.getOverflowing().map(fields),
  };
}

async function enc(tk, a, b, special) {
  try {
    return fields(await tk.encode(a, b, { addSpecialTokens: special }));
  } catch (err) {
    return { error: String(err) };
  }
}

async function dec(tk, e, skip) {
  if (!e || e.error) return null;
  return tk.decode(e.ids, skip);
}

const { texts, pairs } = inputs();
const lines = [];
for (const r of recipes.recipes) {
  const json = build(r);
  const tk = Tokenizer.fromString(json); // throws if the reference rejects the recipe
  const added = {};
  for (const t of JSON.parse(json).added_tokens || []) added[t.content] = tk.tokenToId(t.content);
  lines.push(
    JSON.stringify({
      variant: r.name,
      meta: { vocab_size: tk.getVocabSize(false), vocab_size_with_added: tk.getVocabSize(true), added_token_ids: added },
    }),
  );
  const cases = texts.map((t) => [t, null]).concat(pairs);
  for (const [a, b] of cases) {
    const e0 = await enc(tk, a, b, false);
    const e1 = await enc(tk, a, b, true);
    lines.push(
      JSON.stringify({
        variant: r.name,
        text: a,
        text_pair: b,
        encode: e0,
        encode_special: e1,
        decode: await dec(tk, e0, false),
        decode_special: await dec(tk, e1, false),
        decode_special_skip: await dec(tk, e1, true),
      }),
    );
  }
  // Batch padding (BatchLongest) only shows across a batch: record encodeBatch
  // of the single texts for the recipes that pad that way.
  if (r.set?.padding?.strategy === 'BatchLongest') {
    try {
      const es = await tk.encodeBatch(texts, { addSpecialTokens: true });
      lines.push(JSON.stringify({ variant: r.name, batch: texts, batch_encodings: es.map(fields) }));
    } catch (err) {
      lines.push(JSON.stringify({ variant: r.name, batch: texts, batch_error: String(err) }));
    }
  }
  console.error(`${r.name}: ${cases.length} inputs`);
}
const out = path.join(HERE, 'expected.jsonl.gz');
fs.writeFileSync(out, zlib.gzipSync(Buffer.from(lines.join('\n') + '\n'), { level: 9 }));
console.error(`tokenizers@${VERSION}: wrote ${lines.length} lines to ${out}`);
