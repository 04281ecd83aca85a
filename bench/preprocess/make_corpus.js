// Builds the benchmark corpus: the King James Bible (bible-kjv's `bible` program, public
// domain) as loose JSON, one chapter per line, repeated until it reaches the requested size.
//   bible Gen1:1-Rev22:21 | node make_corpus.js MIN_MB > corpus.json
'use strict';
const fs = require('fs');

const minBytes = Number(process.argv[2] || 20) * 1024 * 1024;
const text = fs.readFileSync(0, 'utf8');
// `bible` prints "Book N" headings before each chapter's verses.
const chapters = text.split(/\n(?=\S[^\n]* \d+\n)/).filter((c) => c.trim().length > 0);
if (chapters.length < 100) {
  process.stderr.write(`make_corpus: only ${chapters.length} chapters read; is bible-kjv installed?\n`);
  process.exit(1);
}
let out = [];
let bytes = 0;
for (let pass = 1; bytes < minBytes; pass++) {
  for (const c of chapters) {
    const line = JSON.stringify({ text: c, pass }) + '\n';
    out.push(line);
    bytes += Buffer.byteLength(line);
  }
}
process.stdout.write(out.join(''));
