// Writes an encoding's BPE ranks from the npm tiktoken package in tiktoken's own rank-file
// format (the cl100k_base.tiktoken that openaipublic serves: "base64-bytes rank" per line),
// so tests and benchmarks need no download beyond npm.
//   node tiktoken_ranks.js cl100k_base out.tiktoken
// The package stores the ranks compressed: lines "<ignored> <first rank> <b64> <b64> ...",
// consecutive tokens having consecutive ranks.
'use strict';
const fs = require('fs');
const path = require('path');

const name = process.argv[2];
const file = path.join(__dirname, 'node_modules', 'tiktoken', 'encoders', `${name}.json`);
const { bpe_ranks } = JSON.parse(fs.readFileSync(file, 'utf8'));
const out = [];
for (const line of bpe_ranks.split('\n')) {
  if (line === '') continue;
  const [, first, ...tokens] = line.split(' ');
  const offset = Number.parseInt(first, 10);
  tokens.forEach((t, i) => out.push(`${t} ${offset + i}`));
}
const tmp = `${process.argv[3]}.tmp.${process.pid}`;
fs.writeFileSync(tmp, out.join('\n') + '\n');
fs.renameSync(tmp, process.argv[3]);
