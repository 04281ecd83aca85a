// Pre-tokenisation of the tiktoken patterns by node's own regex engine, for the splitter
// tests: the byte length (UTF-8) of every piece. Ids cannot show every split (BPE often
// gives the same ids either way), pieces can.
//   node split_pieces.js texts.jsonl cl100k_base|o200k_base|v2 > lengths.jsonl
// JavaScript has no (?i:...) group (node 20), so the contractions are spelled out per case,
// and its \s is not Unicode's White_Space (it adds U+FEFF, lacks U+0085), so \s and \S are
// spelled out as the White_Space class; the rest of each pattern is tiktoken's text.
'use strict';
const fs = require('fs');

const C = String.raw`'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]`;
const U = String.raw`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, W = String.raw`[\p{Ll}\p{Lm}\p{Lo}\p{M}]`;
const P = String.raw`[^\r\n\p{L}\p{N}]`;
const WS = String.raw`\t\n\v\f\r \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000`;
const spell = (p) => p.replaceAll('[^\\s', `[^${WS}`).replaceAll('\\s', `[${WS}]`).replaceAll('\\S', `[^${WS}]`);
const patterns = {
  cl100k_base: `${C}|${P}?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
  o200k_base: `${P}?${U}*${W}+(?:${C})?|${P}?${U}+${W}*(?:${C})?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
  v2: `${P}?${U}*${W}+|${P}?${U}+${W}*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
};
const re = new RegExp(spell(patterns[process.argv[3]]), 'gu');
const out = [];
for (const line of fs.readFileSync(process.argv[2], 'utf8').split('\n')) {
  if (line === '') continue;
  const pieces = JSON.parse(line).match(re) || [];
  out.push(JSON.stringify(pieces.map((p) => Buffer.byteLength(p, 'utf8'))));
}
process.stdout.write(out.join('\n') + '\n');
