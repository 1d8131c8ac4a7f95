// Writes the fixtures of data/table's tests into testdata/tables/ with writers no one in this
// repository wrote: hyparquet-writer and parquet-wasm (Parquet), apache-arrow (Arrow IPC stream
// and file), csv-stringify (CSV). Every file holds rows of ONE deterministic corpus defined here;
// corpus.expected.json and nulls.expected.json are plain JSON.stringify dumps of the in-memory
// rows, the reference the Go tests compare every format against.
//
//   cd testdata/tables/gen && npm ci && node generate.mjs
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as arrow from 'apache-arrow'
import { parquetWriteFile } from 'hyparquet-writer'
import pw from 'parquet-wasm/node'
import { stringify } from 'csv-stringify/sync'

const out = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

// mulberry32: a small seeded PRNG, so the corpus is the same on every run and machine.
function mulberry32(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const rand = mulberry32(20240601)
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)) // inclusive

// Words chosen to trip CSV and JSON writers and readers: commas, quotes, embedded newlines,
// backslashes, tabs, brackets, multi-byte UTF-8 (2, 3 and 4 bytes).
const words = [
  'the', 'model', 'token', 'data', 'train', 'a', 'of', 'café', 'naïve', '東京', 'Привет',
  'emoji🙂', 'a,b', '"quoted"', "it's", 'comma,', 'line\nbreak', 'tab\there', 'back\\slash',
  '{json}', '[1, 2]', 'x;y', 'end.', 'Ünïcödé', '½', '—dash—',
]

const N = 150
const rows = []
for (let i = 0; i < N; i++) {
  const nw = randInt(1, 10)
  const ws = []
  for (let j = 0; j < nw; j++) ws.push(words[randInt(0, words.length - 1)])
  const len = randInt(1, 40)
  const ids = []
  for (let j = 0; j < len; j++) ids.push(rand() < 0.9 ? randInt(0, 999) : randInt(0, 50256))
  rows.push({ text: ws.join(' '), input_ids: ids })
}
// The int32 edges must survive every writer and reader.
rows[3].input_ids = [0, 2147483647, 1]
rows[4].input_ids = [2147483647]

// The nulls corpus: null text, null lists, empty lists, and (JSON lines only) a missing key.
const NN = 24
const nullRows = []
for (let i = 0; i < NN; i++) {
  const r = rows[i]
  nullRows.push({
    text: i % 3 === 0 ? null : r.text,
    input_ids: i % 4 === 1 ? null : i % 5 === 2 ? [] : r.input_ids,
  })
}
// Row 10's text is null; JSON lines write it as a missing key.
nullRows[10].text = null

const write = (name, data) => fs.writeFileSync(path.join(out, name), data)
write('corpus.expected.json', JSON.stringify(rows))
write('nulls.expected.json', JSON.stringify(nullRows))

// --- Parquet via hyparquet-writer: snappy, several row groups, list<int32> in the standard
// three-level LIST layout.
const listSchema = (name) => [
  { name, repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', type: 'INT32', repetition_type: 'OPTIONAL' },
]
const hyparquet = (name, rs, rowGroupSize) => parquetWriteFile({
  filename: path.join(out, name),
  columnData: [
    { name: 'text', data: rs.map((r) => r.text) },
    { name: 'input_ids', data: rs.map((r) => r.input_ids) },
  ],
  schema: [
    { name: 'root', num_children: 2 },
    { name: 'text', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
    ...listSchema('input_ids'),
  ],
  codec: 'SNAPPY',
  rowGroupSize,
})
hyparquet('corpus.parquet', rows, 32)
hyparquet('nulls.parquet', nullRows, 10)

// --- Arrow tables via apache-arrow.
const int32List = new arrow.List(new arrow.Field('item', new arrow.Int32(), true))
const arrowTable = (rs) => new arrow.Table({
  text: arrow.vectorFromArray(rs.map((r) => r.text), new arrow.Utf8()),
  input_ids: arrow.vectorFromArray(rs.map((r) => r.input_ids), int32List),
})
// batched returns the record batches of rs, batch rows each: several batches per file.
const batched = (rs, batch) => {
  const out = []
  for (let i = 0; i < rs.length; i += batch) out.push(...arrowTable(rs.slice(i, i + batch)).batches)
  return out
}
// HF datasets stores its features in the schema metadata under "huggingface".
const features = {
  text: { dtype: 'string', _type: 'Value' },
  input_ids: { feature: { dtype: 'int32', _type: 'Value' }, _type: 'Sequence' },
}
const hfMeta = new Map([['huggingface', JSON.stringify({ info: { features } })]])
const writeArrow = (file, rs, batch, Writer) => {
  const bs = batched(rs, batch)
  const schema = new arrow.Schema(bs[0].schema.fields, hfMeta)
  const w = new Writer()
  w.reset(undefined, schema)
  for (const b of bs) w.write(new arrow.RecordBatch(schema, b.data))
  w.finish()
  fs.mkdirSync(path.dirname(path.join(out, file)), { recursive: true })
  write(file, w.toUint8Array(true))
}
writeArrow('corpus.arrow', rows, 50, arrow.RecordBatchStreamWriter)
writeArrow('corpus.file.arrow', rows, 50, arrow.RecordBatchFileWriter)
writeArrow('nulls.arrow', nullRows, 10, arrow.RecordBatchStreamWriter)

// --- Parquet via parquet-wasm (Rust parquet): zstd, dictionary-encoded strings, row groups of
// 48 rows. The text column repeats 8 distinct strings so the dictionary pays and stays on.
const dictRows = rows.map((r, i) => ({ text: rows[i % 8].text, input_ids: r.input_ids }))
write('dict.expected.json', JSON.stringify(dictRows))
const wasmParquet = (file, table, compression) => {
  const wasmTable = pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'))
  const props = new pw.WriterPropertiesBuilder()
    .setCompression(compression)
    .setDictionaryEnabled(true)
    .setMaxRowGroupSize(48)
    .setCreatedBy('parquet-wasm 0.8.0 (gotpu fixtures)')
    .build()
  write(file, pw.writeParquet(wasmTable, props))
}
wasmParquet('corpus-zstd.parquet', arrowTable(dictRows), pw.Compression.ZSTD)
wasmParquet('corpus-gzip.parquet', arrowTable(rows.slice(0, 40)), pw.Compression.GZIP)

// wide.parquet: list<int64> (input_ids, in int32 range) and large-valued labels: row 7 holds
// 3000000000, outside int32.
const int64List = new arrow.List(new arrow.Field('item', new arrow.Int64(), true))
const wideRows = rows.slice(0, 20)
const wide = new arrow.Table({
  input_ids: arrow.vectorFromArray(wideRows.map((r) => r.input_ids.map(BigInt)), int64List),
  labels: arrow.vectorFromArray(
    wideRows.map((r, i) => (i === 7 ? [1n, 3000000000n] : r.input_ids.map(BigInt))), int64List),
  label: arrow.vectorFromArray(wideRows.map((_, i) => BigInt(i % 3)), new arrow.Int64()),
})
wasmParquet('wide.parquet', wide, pw.Compression.SNAPPY)

// --- save_to_disk layouts, as datasets writes them: one Dataset over two shards, and a
// DatasetDict with train and test.
const saveToDisk = (dir, rs, shards, split) => {
  fs.mkdirSync(path.join(out, dir), { recursive: true })
  const per = Math.ceil(rs.length / shards)
  const files = []
  for (let s = 0; s < shards; s++) {
    const name = `data-${String(s).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.arrow`
    writeArrow(path.join(dir, name), rs.slice(s * per, (s + 1) * per), 40, arrow.RecordBatchStreamWriter)
    files.push({ filename: name })
  }
  write(path.join(dir, 'dataset_info.json'), JSON.stringify({
    citation: '', description: '', features, homepage: '', license: '',
  }, null, 2))
  write(path.join(dir, 'state.json'), JSON.stringify({
    _data_files: files,
    _fingerprint: `f${dir.length}a1b2c3d4e5f6`,
    _format_columns: null,
    _format_kwargs: {},
    _format_type: null,
    _output_all_columns: false,
    _split: split,
  }, null, 2))
}
saveToDisk('save_to_disk', rows, 2, 'train')
fs.mkdirSync(path.join(out, 'dict'), { recursive: true })
write('dict/dataset_dict.json', JSON.stringify({ splits: ['train', 'test'] }))
saveToDisk('dict/train', rows.slice(0, 120), 1, 'train')
saveToDisk('dict/test', rows.slice(120), 1, 'test')

// --- CSV as datasets.to_csv writes it (pandas): header row, RFC 4180 quoting, lists as
// "[1, 2, 3]", a null as an empty cell.
const csvOf = (rs) => stringify(
  rs.map((r) => [r.text ?? '', r.input_ids === null ? '' : `[${r.input_ids.join(', ')}]`]),
  { header: true, columns: ['text', 'input_ids'], record_delimiter: '\n' })
write('corpus.csv', csvOf(rows))
write('nulls.csv', csvOf(nullRows))

// --- JSON lines and a top-level JSON array.
write('corpus.jsonl', rows.map((r) => JSON.stringify(r) + '\n').join(''))
write('corpus-array.json', '[\n' + rows.map((r) => '  ' + JSON.stringify(r)).join(',\n') + '\n]\n')
write('nulls.jsonl', nullRows.map((r, i) => {
  if (i === 10) return JSON.stringify({ input_ids: r.input_ids }) + '\n'
  return JSON.stringify(r) + '\n'
}).join(''))

// --- Text: the texts joined by newlines; the text loader yields one row per line.
write('corpus.txt', rows.map((r) => r.text).join('\n') + '\n')
