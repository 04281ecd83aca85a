// Reference token ids from tiktoken (encode_ordinary semantics: a literal <|endoftext|> is
// plain text). Input: a file of JSON lines, each a JSON string. Output: one JSON array of ids
// per input line.   node tiktoken_encode.js texts.jsonl [encoding [v1|v2]] > ids.jsonl
// With v1 or v2 the encoding's ranks split by Megatron's TikTokenizer pattern of that name.
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding, Tiktoken } = require(path.join(__dirname, 'node_modules', 'tiktoken'));

// Megatron-LM's PATTERN_TIKTOKEN (v1) and PATTERN_TIKTOKEN_V2.
const U = String.raw`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, W = String.raw`[\p{Ll}\p{Lm}\p{Lo}\p{M}]`;
const P = String.raw`[^\r\n\p{L}\p{N}]`;
const megatron = {
  v1: String.raw`[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`,
  v2: `${P}?${U}*${W}+|${P}?${U}+${W}*|` + String.raw`\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
};
const name = process.argv[3] || 'gpt2', pattern = process.argv[4];
let enc;
if (pattern) {
  const d = require(path.join(__dirname, 'node_modules', 'tiktoken', 'encoders', `${name}.json`));
  enc = new Tiktoken(d.bpe_ranks, d.special_tokens, megatron[pattern]);
} else {
  enc = get_encoding(name);
}
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n');
const out = [];
for (const line of lines) {
  if (line === '') continue;
  // disallowed_special = [] makes a literal <|endoftext|> ordinary text instead of an error.
  out.push(JSON.stringify(Array.from(enc.encode(JSON.parse(line), [], []))));
}
enc.free();
process.stdout.write(out.join('\n') + '\n');
