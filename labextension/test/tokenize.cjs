// Tokenize texts with the extension's stream parser, outside a browser, for
// tests/test_highlighting.py (which compares the result with the Pygments lexer).
// Usage: node test/tokenize.cjs < texts.json  (a JSON list of strings)
// Prints a JSON list, per text, of [start, end, token] with offsets into the text.
// Needs the CommonJS build: npx tsc --module commonjs --outDir lib/cjs (labextension/README.md).
'use strict';
const { StringStream } = require('@codemirror/language');
const path = require('path');
const fs = require('fs');
const { canchoParser: makeParser } = require('../lib/cjs/cancho.js');

// The catalogue the bundle loads at run time (prebuilt/static/words.json).
const words = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', 'prebuilt', 'static', 'words.json'), 'utf8')
);
const canchoParser = makeParser(words);

const INDENT = 4;

function tokenize(text) {
  const state = canchoParser.startState(INDENT);
  const out = [];
  let offset = 0;
  for (const line of text.split('\n')) {
    if (line === '') {
      if (canchoParser.blankLine) {
        canchoParser.blankLine(state, INDENT);
      }
    } else {
      const stream = new StringStream(line, 4, INDENT);
      while (!stream.eol()) {
        const start = stream.pos;
        stream.start = start;
        const token = canchoParser.token(stream, state);
        if (stream.pos === start) {
          throw new Error(`no progress at ${offset + start} in ${JSON.stringify(line)}`);
        }
        out.push([offset + start, offset + stream.pos, token]);
      }
    }
    offset += line.length + 1;
  }
  return out;
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', chunk => (input += chunk));
process.stdin.on('end', () => {
  process.stdout.write(JSON.stringify(JSON.parse(input).map(tokenize)));
});
