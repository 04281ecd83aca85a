// Reference GPT-2 token ids from tiktoken (encoding "gpt2", encode_ordinary semantics: a
// literal <|endoftext|> is plain text). Input: a file of JSON lines, each a JSON string.
// Output: one JSON array of ids per input line.   node tiktoken_encode.js texts.jsonl > ids.jsonl
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding } = require(path.join(__dirname, 'node_modules', 'tiktoken'));

const enc = get_encoding('gpt2');
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n');
const out = [];
for (const line of lines) {
  if (line === '') continue;
  // disallowed_special = [] makes a literal <|endoftext|> ordinary text instead of an error.
  out.push(JSON.stringify(Array.from(enc.encode(JSON.parse(line), [], []))));
}
enc.free();
process.stdout.write(out.join('\n') + '\n');
