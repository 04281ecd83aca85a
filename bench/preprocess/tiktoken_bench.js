// tiktoken (encoding argv[3], default "gpt2"; one thread, encode only) on the texts of a loose-JSON corpus.
// JSON parsing happens before the clock starts. Prints: tokens wall_seconds text_bytes cpu_seconds
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding } = require(path.join(__dirname, '..', '..', 'tests', 'peers', 'node_modules', 'tiktoken'));

const texts = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
let bytes = 0;
for (const t of texts) bytes += Buffer.byteLength(t);
const enc = get_encoding(process.argv[3] || 'gpt2');
const start = process.hrtime.bigint();
const cpu0 = process.cpuUsage();
let tokens = 0;
for (const t of texts) tokens += enc.encode_ordinary(t).length;
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
const cpu = process.cpuUsage(cpu0);
enc.free();
process.stdout.write(`${tokens} ${seconds} ${bytes} ${(cpu.user + cpu.system) / 1e6}\n`);
