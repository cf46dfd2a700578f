/**
 * A strict JSON parser that says exactly where and why a text is not JSON. `JSON.parse` gives
 * the same values but its messages differ between Node versions and often lack a position;
 * the agent reads these messages in its next tick, so they must point at the mistake
 * (trailing comma, single quotes, comment…) by line and column.
 */

type StrictJsonResult = { ok: true; value: unknown } | { ok: false; message: string; offset: number };

/** Deeper nesting than this is refused (no recursion limit surprises on hostile input). */
export const maxJsonDepth = 64;

class JsonSyntaxError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

/** Parse `text` as one JSON value (RFC 8259: no comments, no trailing commas, double quotes only). */
export function parseStrictJson(text: string): StrictJsonResult {
  const p = new Parser(text);
  try {
    p.skipWs();
    const value = p.value(0);
    p.skipWs();
    if (p.pos < text.length) p.fail(`unexpected ${p.describe()} after the JSON value`);
    return { ok: true, value };
  } catch (err) {
    if (err instanceof JsonSyntaxError) return { ok: false, message: err.message, offset: err.offset };
    throw err;
  }
}

/** 1-based line and column of `offset` in `text`. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  const end = Math.min(offset, text.length);
  for (let i = 0; i < end; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: end - lineStart + 1 };
}

class Parser {
  pos = 0;
  constructor(private readonly s: string) {}

  fail(message: string, at = this.pos): never {
    throw new JsonSyntaxError(message, at);
  }

  describe(at = this.pos): string {
    if (at >= this.s.length) return 'end of input';
    const c = this.s[at]!;
    if (c === '/' && (this.s[at + 1] === '/' || this.s[at + 1] === '*'))
      return 'comment (comments are not allowed in JSON)';
    if (c === "'") return "' (strings need double quotes)";
    if (c === '\n') return 'line break';
    return `'${c}'`;
  }

  skipWs(): void {
    const s = this.s;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c === 32 || c === 9 || c === 10 || c === 13) this.pos++;
      else break;
    }
  }

  value(depth: number): unknown {
    if (depth > maxJsonDepth) this.fail(`nesting deeper than ${maxJsonDepth} levels`);
    const c = this.s[this.pos];
    switch (c) {
      case '{':
        return this.object(depth);
      case '[':
        return this.array(depth);
      case '"':
        return this.string();
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'n':
        return this.literal('null', null);
      default:
        if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
        return this.fail(`expected a value, found ${this.describe()}`);
    }
  }

  literal<T>(word: string, value: T): T {
    if (this.s.startsWith(word, this.pos)) {
      this.pos += word.length;
      return value;
    }
    const m = /^[A-Za-z_]+/.exec(this.s.slice(this.pos, this.pos + 20));
    return this.fail(`expected a value, found '${m ? m[0] : this.s[this.pos]}'`);
  }

  number(): number {
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(this.s.slice(this.pos, this.pos + 400));
    if (!m) return this.fail('invalid number');
    const after = this.s[this.pos + m[0].length];
    if (after !== undefined && /[0-9.eE+\-xX]/.test(after)) this.fail('invalid number', this.pos + m[0].length);
    this.pos += m[0].length;
    return Number(m[0]);
  }

  string(): string {
    const s = this.s;
    const start = this.pos;
    this.pos++; // opening quote
    let out = '';
    let chunk = this.pos;
    while (true) {
      if (this.pos >= s.length) this.fail('unterminated string', start);
      const c = s.charCodeAt(this.pos);
      if (c === 34) {
        out += s.slice(chunk, this.pos);
        this.pos++;
        return out;
      }
      if (c < 32) this.fail(c === 10 ? 'line break inside a string (write \\n)' : 'control character inside a string');
      if (c === 92) {
        out += s.slice(chunk, this.pos);
        const e = s[this.pos + 1];
        const simple: Record<string, string> = {
          '"': '"',
          '\\': '\\',
          '/': '/',
          b: '\b',
          f: '\f',
          n: '\n',
          r: '\r',
          t: '\t',
        };
        if (e !== undefined && e in simple) {
          out += simple[e];
          this.pos += 2;
        } else if (e === 'u') {
          const hex = s.slice(this.pos + 2, this.pos + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('invalid \\u escape (needs 4 hex digits)');
          out += String.fromCharCode(parseInt(hex, 16));
          this.pos += 6;
        } else {
          this.fail(`invalid escape '\\${e ?? ''}'`);
        }
        chunk = this.pos;
        continue;
      }
      this.pos++;
    }
  }

  array(depth: number): unknown[] {
    const out: unknown[] = [];
    this.pos++;
    this.skipWs();
    if (this.s[this.pos] === ']') {
      this.pos++;
      return out;
    }
    while (true) {
      this.skipWs();
      if (this.s[this.pos] === ']' && out.length > 0) this.fail("trailing comma before ']'");
      out.push(this.value(depth + 1));
      this.skipWs();
      const c = this.s[this.pos];
      if (c === ',') {
        this.pos++;
        continue;
      }
      if (c === ']') {
        this.pos++;
        return out;
      }
      this.fail(`expected ',' or ']' after array element, found ${this.describe()}`);
    }
  }

  object(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.pos++;
    this.skipWs();
    if (this.s[this.pos] === '}') {
      this.pos++;
      return out;
    }
    let first = true;
    while (true) {
      this.skipWs();
      if (this.s[this.pos] === '}' && !first) this.fail("trailing comma before '}'");
      if (this.s[this.pos] !== '"') this.fail(`expected a double-quoted property name, found ${this.describe()}`);
      const key = this.string();
      this.skipWs();
      if (this.s[this.pos] !== ':') this.fail(`expected ':' after property name, found ${this.describe()}`);
      this.pos++;
      this.skipWs();
      const v = this.value(depth + 1);
      // Same semantics as JSON.parse: a "__proto__" key becomes an own property, never the prototype.
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      first = false;
      this.skipWs();
      const c = this.s[this.pos];
      if (c === ',') {
        this.pos++;
        continue;
      }
      if (c === '}') {
        this.pos++;
        return out;
      }
      this.fail(`expected ',' or '}' after property value, found ${this.describe()}`);
    }
  }
}
