// Builds the benchmark corpus as loose JSON (one {"text"} document per line) from public
// texts a Debian machine has offline, without repeating any document (a repeated corpus lets
// a tokenizer's piece cache hit more often than real data does):
//   1. the King James Bible (bible-kjv's `bible` program, read from stdin), one chapter per document;
//   2. the GNU manuals in /usr/share/info (one info node per document);
//   3. the Debian changelogs in /usr/share/doc/*/changelog.Debian.gz (one entry per document);
//   4. the upstream changelogs in /usr/share/doc/*/changelog.gz (paragraphs grouped into
//      documents of about 4 KB);
// in that order, files sorted by name, each distinct document text once (exact duplicates,
// e.g. the changelog that several binary packages of one source ship, are dropped), until
// MIN_MB is reached. Prints the composition to stderr.
//   bible Gen1:1-Rev22:21 | node make_corpus.js MIN_MB > corpus.json
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const crypto = require('crypto');

const minBytes = Number(process.argv[2] || 20) * 1024 * 1024;
const seen = new Set();
const out = [];
let bytes = 0;
const composition = [];

function read(file) {
  const raw = fs.readFileSync(file);
  return (file.endsWith('.gz') ? zlib.gunzipSync(raw) : raw).toString('utf8');
}
function files(globDir, nameTest) {  // sorted files under /usr/share/doc/<pkg>/ or a flat folder
  const found = [];
  for (const entry of fs.readdirSync(globDir).sort()) {
    const p = path.join(globDir, entry);
    if (nameTest(entry, p)) found.push(p);
  }
  return found;
}
function add(source, docs) {
  let n = 0, b = 0;
  for (const d of docs) {
    if (bytes >= minBytes) break;
    const text = d.trim();
    if (text.length < 64) continue;  // headings and separators alone are not documents
    const h = crypto.createHash('sha1').update(text).digest('hex');
    if (seen.has(h)) continue;
    seen.add(h);
    const line = JSON.stringify({ text }) + '\n';
    out.push(line);
    bytes += Buffer.byteLength(line);
    b += Buffer.byteLength(line);
    n++;
  }
  composition.push(`${source}: ${n} documents, ${(b / 1048576).toFixed(1)} MB`);
}
function* groupParagraphs(text, target) {
  let cur = '';
  for (const para of text.split(/\n\s*\n/)) {
    cur += para + '\n\n';
    if (cur.length >= target) { yield cur; cur = ''; }
  }
  if (cur) yield cur;
}

// 1. KJV: `bible` prints "Book N" headings before each chapter's verses.
const kjv = fs.readFileSync(0, 'utf8').split(/\n(?=\S[^\n]* \d+\n)/);
if (kjv.length < 1000) {
  process.stderr.write(`make_corpus: only ${kjv.length} chapters read; is bible-kjv installed?\n`);
  process.exit(1);
}
add('KJV Bible (bible-kjv)', kjv);

// 2. GNU info manuals: nodes are separated by the 0x1f byte.
function* infoNodes() {
  const dir = '/usr/share/info';
  if (!fs.existsSync(dir)) return;
  for (const f of files(dir, (e) => /\.info(-\d+)?(\.gz)?$/.test(e))) yield* read(f).split('\x1f');
}
add('GNU info manuals (/usr/share/info)', infoNodes());

// 3 and 4. Changelogs, one package folder at a time.
function* changelogs(name, split) {
  for (const dir of files('/usr/share/doc', () => true)) {
    const f = path.join(dir, name);
    let text;
    try { text = read(f); } catch (e) { continue; }  // most packages have no such file
    yield* split(text);
  }
}
// A Debian changelog entry starts with "package (version) distribution; urgency=...".
add('Debian changelogs (/usr/share/doc/*/changelog.Debian.gz)',
    changelogs('changelog.Debian.gz', (t) => t.split(/\n(?=\S+ \([^)]*\) [^\n]*; urgency=)/)));
add('upstream changelogs (/usr/share/doc/*/changelog.gz)',
    changelogs('changelog.gz', (t) => groupParagraphs(t, 4096)));

for (const c of composition) process.stderr.write(`  ${c}\n`);
if (bytes < minBytes) {
  process.stderr.write(`make_corpus: only ${(bytes / 1048576).toFixed(1)} MB of distinct text found (wanted ${minBytes / 1048576} MB)\n`);
  process.exit(1);
}
process.stdout.write(out.join(''));
