/**
 * A CodeMirror 6 stream tokenizer for cancho source and cancho notebook cells.
 *
 * The word classes are data, not code: `words.json`, generated from the compiler's catalogues by
 * `python -m cancho_kernel.highlight_words --write` into the prebuilt extension's static folder
 * and loaded when the language is first used (index.ts), so this tokenizer and the Pygments lexer
 * (cancho_kernel/pygments_lexer.py) agree on what a keyword, type, capability or builtin is, and
 * a new builtin needs no rebuild of this bundle.
 *
 * A cell's header (leading blank lines, `# NBVAL` comments and `%`/`%%` directive lines, the
 * same header the kernel strips) is shown one directive token per line; a header naming `%%c`
 * makes the rest of the cell C, tokenized by the legacy `clike` C mode.
 */

import {
  HighlightStyle,
  LanguageSupport,
  StreamLanguage,
  StringStream,
  syntaxHighlighting
} from '@codemirror/language';
import type { StreamParser } from '@codemirror/language';
import { c as cMode } from '@codemirror/legacy-modes/mode/clike';
import { tags } from '@lezer/highlight';

/** The word classes of words.json. */
export type WordClass =
  | 'keyword'
  | 'constant'
  | 'mode'
  | 'contextual'
  | 'type'
  | 'capability'
  | 'builtin';

/** The catalogue as words.json holds it: each class's words. */
export type Words = Partial<Record<WordClass, string[]>>;

/** The CodeMirror token (tag) name used for each word class. */
const CLASS_TOKEN: Record<WordClass, string> = {
  keyword: 'keyword',
  constant: 'bool',
  mode: 'modifier',
  contextual: 'definitionKeyword',
  type: 'typeName',
  capability: 'typeName.special',
  builtin: 'variableName.standard'
};

/** Every catalogued word and its class (an unknown class in the data is ignored). */
type WordTable = ReadonlyMap<string, WordClass>;

function wordTable(words: Words): WordTable {
  const table = new Map<string, WordClass>();
  for (const [cls, list] of Object.entries(words)) {
    if (cls in CLASS_TOKEN && Array.isArray(list)) {
      for (const w of list) {
        table.set(w, cls as WordClass);
      }
    }
  }
  return table;
}

/** The token names this tokenizer returns besides the word classes. */
export const TOKEN = {
  directive: 'processingInstruction',
  comment: 'lineComment',
  string: 'string',
  escape: 'escape',
  char: 'character',
  number: 'number',
  region: 'labelName',
  effect: 'attributeName',
  fnName: 'variableName.function.definition',
  typeDef: 'typeName.definition',
  userType: 'className',
  operator: 'operator',
  punctuation: 'punctuation'
} as const;

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*/;

/** Parser state; copied per line by `copyState`. */
export interface CanchoState {
  /** Still in the cell header (nothing but blank, `# NBVAL` and directive lines so far). */
  header: boolean;
  /** The header named `%%c`: the body is C, with this C-mode state. */
  c: unknown | null;
  /** The previous token was `->`, so a `[` opens an effect row. */
  afterArrow: boolean;
  /** Inside an effect row `-> [ ... ]`: identifiers are effect labels. */
  inRow: boolean;
  /** What the next identifier names: a function, a declared type, a region, a static. */
  next: 'fn' | 'type' | 'region' | 'static' | 'allocRegion' | null;
  /** The previous token was an `alloc`/`alloc_slice` form, so `[` opens its region. */
  afterAlloc: boolean;
  /** An item may start here: at column 0, or right after a `pub` there. */
  itemStart: boolean;
}

function startState(): CanchoState {
  return {
    header: true,
    c: null,
    afterArrow: false,
    inRow: false,
    next: null,
    afterAlloc: false,
    itemStart: true
  };
}

/** A copy of the nested C state: the C mode's own copy if it has one, else a shallow copy. */
function copyC(c: unknown): unknown {
  if (cMode.copyState) {
    return (cMode.copyState as (x: unknown) => unknown)(c);
  }
  if (typeof c !== 'object' || c === null) {
    return c;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(c as Record<string, unknown>)) {
    out[k] = Array.isArray(v) ? v.slice() : v;
  }
  return out;
}

function copyState(s: CanchoState): CanchoState {
  return { ...s, c: s.c === null ? null : copyC(s.c) };
}

/** One header line (the stream is at the start of a line with something on it). */
function headerLine(stream: StringStream, state: CanchoState, table: WordTable): string | null {
  const text = stream.string.trim();
  if (text === '') {
    stream.skipToEnd();
    return null;
  }
  if (text.startsWith('%')) {
    if (stream.eatSpace()) {
      return null;
    }
    const word = text.split(/\s+/)[0];
    if (word === '%%c') {
      state.c = cMode.startState ? cMode.startState(stream.indentUnit) : {};
    }
    stream.skipToEnd();
    return TOKEN.directive;
  }
  if (/^# ?NBVAL/.test(text)) {
    stream.skipToEnd();
    return TOKEN.comment;
  }
  state.header = false;
  return body(stream, state, table);
}

/** Take a quoted literal's rest; a literal ends at its closing quote or at the line's end. */
function quoted(stream: StringStream, quote: string): void {
  let ch: string | void;
  while ((ch = stream.next()) !== undefined) {
    if (ch === '\\') {
      stream.next();
    } else if (ch === quote) {
      return;
    }
  }
}

/** One token of the cancho body. */
function body(stream: StringStream, state: CanchoState, table: WordTable): string | null {
  if (state.c !== null) {
    return (cMode.token as (s: StringStream, st: unknown) => string | null)(stream, state.c);
  }
  // An item starts at column 0 (after an optional `pub`), as in the Pygments rules.
  const atSol = stream.sol();
  if (atSol) {
    state.itemStart = true;
  }
  if (stream.eatSpace()) {
    if (atSol) {
      state.itemStart = false;
    }
    return null;
  }
  const wasItemStart = state.itemStart;
  state.itemStart = false;
  const afterArrow = state.afterArrow;
  state.afterArrow = false;
  const afterAlloc = state.afterAlloc;
  state.afterAlloc = false;
  const next = state.next;
  state.next = null;

  if (stream.match('//')) {
    stream.skipToEnd();
    return TOKEN.comment;
  }
  if (stream.eat('"')) {
    quoted(stream, '"');
    return TOKEN.string;
  }
  if (stream.match(/^'(\\.|[^'\\])'/)) {
    return TOKEN.char;
  }
  // A tuple field right after `.` (`t.0.1`) is an integer, never a float.
  const prev = stream.pos > 0 ? stream.string.charAt(stream.pos - 1) : '';
  if (prev === '.' && stream.match(/^[0-9][0-9_]*/)) {
    return TOKEN.number;
  }
  if (
    stream.match(/^0x[0-9a-fA-F][0-9a-fA-F_]*/) ||
    stream.match(/^[0-9][0-9_]*\.[0-9][0-9_]*([eE][+-]?[0-9][0-9_]*)?(f32)?/) ||
    stream.match(/^[0-9][0-9_]*[eE][+-]?[0-9][0-9_]*(f32)?/) ||
    stream.match(/^[0-9][0-9_]*/)
  ) {
    return TOKEN.number;
  }
  // A region: `&a`, `&!a`, `&static`.
  if (stream.match(/^&!?[A-Za-z_][A-Za-z0-9_]*/)) {
    return TOKEN.region;
  }
  const m = stream.match(IDENT) as RegExpMatchArray | null;
  if (m) {
    return word(m[0], stream, state, wasItemStart, next, table);
  }
  if (stream.match('->')) {
    state.afterArrow = true;
    return TOKEN.operator;
  }
  if (stream.match(/^(=>|::|\.\.|&&|\|\||==|!=|<=|>=|<<|>>)/)) {
    return TOKEN.operator;
  }
  const ch = stream.next() as string;
  if (ch === '[') {
    if (afterArrow) {
      state.inRow = true;
    } else if (afterAlloc) {
      state.next = 'allocRegion';
    }
    return null;
  }
  if (ch === ']') {
    state.inRow = false;
    return null;
  }
  if ('+-*/%!|^~&<>='.includes(ch)) {
    return TOKEN.operator;
  }
  if (',.;:'.includes(ch)) {
    return TOKEN.punctuation;
  }
  return null;
}

/** The token of an identifier or keyword, given what came before it. */
function word(
  w: string,
  stream: StringStream,
  state: CanchoState,
  itemStart: boolean,
  next: CanchoState['next'],
  table: WordTable
): string | null {
  // A name right after `region`, `fn`, `struct`/`enum` or `static` is named by its position,
  // whatever the word (the Pygments rules match these pairs first too).
  if (next === 'allocRegion' || next === 'region') {
    return TOKEN.region;
  }
  if (next === 'fn') {
    return TOKEN.fnName;
  }
  if (next === 'type') {
    return TOKEN.typeDef;
  }
  if (next === 'static') {
    return 'variableName.constant';
  }
  if (state.inRow) {
    return TOKEN.effect;
  }
  const cls = table.get(w);
  if (cls === 'contextual') {
    // `edition N;` and `static NAME: ...` are keywords only where an item starts.
    if (w === 'edition' && itemStart && stream.match(/^\s+[0-9]/, false)) {
      return CLASS_TOKEN.contextual;
    }
    if (w === 'static' && itemStart && stream.match(/^\s+[A-Za-z_][A-Za-z0-9_]*\s*:/, false)) {
      state.next = 'static';
      return CLASS_TOKEN.contextual;
    }
    return 'variableName';
  }
  if (cls !== undefined) {
    if (w === 'fn') {
      state.next = 'fn';
    } else if (w === 'struct' || w === 'enum') {
      state.next = 'type';
    } else if (w === 'region') {
      state.next = 'region';
    } else if (w === 'pub') {
      state.itemStart = itemStart;
    } else if (w === 'alloc' || w === 'alloc_slice') {
      state.afterAlloc = true;
    }
    return CLASS_TOKEN[cls];
  }
  if (/^[A-Z]/.test(w)) {
    return TOKEN.userType;
  }
  return 'variableName';
}

/** The cancho stream parser for a word catalogue. */
export function canchoParser(words: Words): StreamParser<CanchoState> {
  const table = wordTable(words);
  return {
    name: 'cancho',
    startState,
    copyState,
    token(stream: StringStream, state: CanchoState): string | null {
      if (state.header && stream.sol()) {
        return headerLine(stream, state, table);
      }
      if (state.header) {
        // The rest of a directive line after its leading whitespace.
        stream.skipToEnd();
        return TOKEN.directive;
      }
      return body(stream, state, table);
    },
    blankLine(state: CanchoState, indentUnit: number): void {
      if (state.c !== null && cMode.blankLine) {
        (cMode.blankLine as (s: unknown, u: number) => void)(state.c, indentUnit);
      }
    },
    languageData: {
      commentTokens: { line: '//' }
    }
  };
}

/**
 * Colours for the tags JupyterLab's own highlight style leaves unstyled, in the theme's
 * variables so light and dark themes both apply.
 */
export const canchoHighlightStyle = HighlightStyle.define([
  { tag: tags.typeName, color: 'var(--jp-mirror-editor-variable-3-color)' },
  {
    tag: tags.special(tags.typeName),
    color: 'var(--jp-mirror-editor-atom-color)',
    fontWeight: 'bold'
  },
  { tag: tags.processingInstruction, color: 'var(--jp-mirror-editor-meta-color)' },
  { tag: tags.character, color: 'var(--jp-mirror-editor-string-color)' }
]);

/** The language with its extra highlighting, as the editor registry loads it. */
export function cancho(words: Words): LanguageSupport {
  return new LanguageSupport(StreamLanguage.define(canchoParser(words)), [
    syntaxHighlighting(canchoHighlightStyle)
  ]);
}
