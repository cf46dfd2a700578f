/**
 * The generated-tool safety check (core/tool-safety.ts): forbidden modules and globals, fs
 * writes, and the evasions a model might try (aliasing, computed members, string assembly,
 * reflection) — each refused with the rule that caught it — plus property tests: random
 * spellings of forbidden names are always refused, and random safe tools always pass.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkToolSource, formatViolations, type ViolationRule } from '../../core/tool-safety.js';

const safeTool = `
import { readFileSync, promises as fsp } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';

/** Word frequencies of a text. */
export function wordCount(text) {
  const counts = {};
  for (const w of text.split(/\\s+/).filter(Boolean)) {
    const key = w.toLowerCase();
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}
export function lastOf(xs) { let i = 0; i += 1; return xs[xs.length - i]; }
export async function digestFile(p) { const a = readFileSync(path.resolve(p)); const b = await fsp.readFile(p); return createHash('sha256').update(a).update(b).digest('hex'); }
export const meta = { name: 'word_count', env: process.env.NODE_ENV ?? 'test' };
class Counter { #n = 0; constructor() { this.#n = 1; } get value() { return this.#n; } }
export default { wordCount, Counter };
`;

const safeTests = `
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wordCount } from './tool.mjs';
test('counts', () => { assert.deepEqual(wordCount('a b A'), { a: 2, b: 1 }); });
`;

describe('checkToolSource: accepted code', () => {
  it('passes an ordinary tool and its node:test tests', () => {
    const r = checkToolSource(safeTool);
    expect(formatViolations(r)).toBe('');
    expect(r.ok).toBe(true);
    expect(checkToolSource(safeTests)).toEqual({ ok: true, violations: [] });
  });
});

describe('checkToolSource: refusals, each with its rule and position', () => {
  const cases: Array<[string, string, ViolationRule]> = [
    // forbidden modules, every spelling of loading them
    ['import child_process', `import { exec } from 'child_process';`, 'forbidden_module'],
    ['import node:child_process', `import cp from 'node:child_process';`, 'forbidden_module'],
    ['import net', `import * as net from 'net';`, 'forbidden_module'],
    ['import http', `import http from 'http';`, 'forbidden_module'],
    ['import https', `import 'node:https';`, 'forbidden_module'],
    ['import http2', `import { connect } from 'http2';`, 'forbidden_module'],
    ['import dgram', `import dgram from 'dgram';`, 'forbidden_module'],
    ['import worker_threads', `import { Worker } from 'worker_threads';`, 'forbidden_module'],
    ['import vm', `import vm from 'node:vm';`, 'forbidden_module'],
    ['import cluster', `import cluster from 'cluster';`, 'forbidden_module'],
    ['import module (createRequire)', `import { createRequire } from 'module';`, 'forbidden_module'],
    ['re-export child_process', `export * from 'child_process';`, 'forbidden_module'],
    ['re-export named', `export { spawn } from 'node:child_process';`, 'forbidden_module'],
    ['literal import()', `await import('node:child_process');`, 'forbidden_module'],
    ['literal require', `const cp = require('child_process');`, 'forbidden_module'],
    ['template require', 'const cp = require(`child_process`);', 'forbidden_module'],
    ['npm package', `import axios from 'axios';`, 'unknown_module'],
    ['absolute path', `import x from '/etc/passwd.mjs';`, 'unknown_module'],
    ['parent dir', `import x from '../secrets.mjs';`, 'unknown_module'],
    // dynamic loading
    ['require of concatenation', `const cp = require('child_' + 'process');`, 'dynamic_require'],
    ['require of variable', `const m = x; require(m);`, 'dynamic_require'],
    ['require of template with expr', 'require(`child_${"process"}`);', 'dynamic_require'],
    ['import() of variable', `const m = x; await import(m);`, 'dynamic_import'],
    ['import() of concatenation', `await import('v' + 'm');`, 'dynamic_import'],
    ['require aliased', `const r = require; r('fs');`, 'require_alias'],
    ['require.call', `require.call(null, 'fs');`, 'require_alias'],
    ['require passed on', `load(require);`, 'require_alias'],
    ['globalThis.require', `globalThis.require('fs');`, 'require_alias'],
    // evaluation
    ['eval', `eval('1 + 1');`, 'forbidden_global'],
    ['indirect eval', `(0, eval)('1');`, 'forbidden_global'],
    ['eval aliased', `const e = eval; e('1');`, 'forbidden_global'],
    ['globalThis.eval', `globalThis.eval('1');`, 'forbidden_global'],
    ["globalThis['eval']", `globalThis['eval']('1');`, 'forbidden_global'],
    ["globalThis['ev'+'al']", `globalThis['ev' + 'al']('1');`, 'dynamic_member'],
    ['global[k]', `const k = pick(); global[k]('1');`, 'dynamic_member'],
    ['self.eval', `self.eval('x');`, 'forbidden_global'],
    ['Function()', `Function('return this')();`, 'forbidden_global'],
    ['new Function', `new Function('a', 'return a')(1);`, 'forbidden_global'],
    ['Function aliased', `const F = Function; new F('x');`, 'forbidden_global'],
    ['arrow.constructor', `(() => {}).constructor('return process')();`, 'forbidden_member'],
    ["obj['constructor']", `({})['constructor']['constructor']('x')();`, 'forbidden_member'],
    ['constructor by pieces', `const a = 'con', b = 'structor'; (() => {})[a + b]('x');`, 'dynamic_member'],
    ['constructor by join', `(() => {})[['con', 'structor'].join('')]('x');`, 'dynamic_member'],
    ['constructor by char codes', `(() => {})[String.fromCharCode(99, 111, 110)]('x');`, 'dynamic_member'],
    ['constructor by atob', `(() => {})[atob('Y29uc3RydWN0b3I=')]('x');`, 'dynamic_member'],
    ['constructor by template', 'const p = "con"; (() => {})[`${p}structor`]("x");', 'dynamic_member'],
    ['constructor by +=', `let k = 'con'; k += 'structor'; (() => {})[k]('x');`, 'dynamic_member'],
    ['constructor by reverse', `const k = 'rotcurtsnoc'.split('').reverse().join(''); ({})[k];`, 'dynamic_member'],
    ['constructor string', `const k = 'constructor'; ({})[k];`, 'suspicious_string'],
    ['__proto__', `({}).__proto__.polluted = 1;`, 'forbidden_member'],
    ['getPrototypeOf', `Object.getPrototypeOf(async () => {});`, 'reflection'],
    ['getOwnPropertyDescriptor', `Object.getOwnPropertyDescriptor(x, y);`, 'reflection'],
    ['Object[k]', `const k = pick(); Object[k](x);`, 'dynamic_member'],
    ['Reflect', `Reflect.apply(f, null, []);`, 'forbidden_global'],
    ['Proxy', `new Proxy({}, {});`, 'forbidden_global'],
    ['WebAssembly', `WebAssembly.compile(bytes);`, 'forbidden_global'],
    // network globals
    ['fetch', `await fetch('http://example.com');`, 'forbidden_global'],
    ['globalThis.fetch', `globalThis.fetch('http://x');`, 'forbidden_global'],
    ['WebSocket', `new WebSocket('ws://x');`, 'forbidden_global'],
    // process
    ['process.binding', `process.binding('spawn_sync');`, 'process_binding'],
    ['process.dlopen', `process.dlopen(m, '/tmp/x.node');`, 'process_binding'],
    ['process._linkedBinding', `process._linkedBinding('x');`, 'process_binding'],
    ["process['binding']", `process['binding']('fs');`, 'process_binding'],
    ['process[k]', `const k = pick(); process[k]('fs');`, 'dynamic_member'],
    ['globalThis.process.binding', `globalThis.process.binding('fs');`, 'process_binding'],
    ['process aliased', `const p = process; p.binding('fs');`, 'global_escape'],
    ['process destructured', `const { binding } = process;`, 'global_escape'],
    ['process passed', `inspect(process);`, 'global_escape'],
    ['process.mainModule', `process.mainModule.require('fs');`, 'forbidden_member'],
    ['process.kill', `process.kill(1);`, 'forbidden_member'],
    ['globalThis aliased', `const g = globalThis; g.eval('1');`, 'global_escape'],
    ['globalThis destructured', `const { eval: e } = globalThis;`, 'global_escape'],
    ['module.constructor', `module.constructor._load('child_process');`, 'forbidden_member'],
    // fs writes, every way to reach them
    ['fs.writeFileSync', `import fs from 'fs'; fs.writeFileSync('/x', 'y');`, 'fs_write'],
    ['fs namespace write', `import * as fs from 'node:fs'; fs.appendFileSync('/x', 'y');`, 'fs_write'],
    ['named write import', `import { writeFile } from 'fs/promises';`, 'fs_write'],
    ['named rm import', `import { rm as remove } from 'node:fs/promises';`, 'fs_write'],
    ['createWriteStream', `import fs from 'fs'; fs.createWriteStream('/x');`, 'fs_write'],
    ['unlink', `import fs from 'fs'; fs.unlinkSync('/x');`, 'fs_write'],
    ['mkdir', `import { mkdirSync } from 'fs';`, 'fs_write'],
    ['fs.promises.writeFile', `import fs from 'fs'; await fs.promises.writeFile('/x', 'y');`, 'fs_write'],
    ['{ promises }.rm', `import { promises } from 'fs'; await promises.rm('/x');`, 'fs_write'],
    ['fs/promises namespace', `import * as fsp from 'fs/promises'; await fsp.writeFile('a', 'b');`, 'fs_write'],
    ['require(fs).write', `require('fs').writeFileSync('/x', 'y');`, 'fs_write'],
    ['require fs binding', `const fs = require('fs'); fs.rmSync('/', { recursive: true });`, 'fs_write'],
    ['require fs destructure', `const { writeFileSync } = require('node:fs');`, 'fs_write'],
    ['fs.openSync (w mode)', `import fs from 'fs'; fs.openSync('/x', 'w');`, 'fs_write'],
    ['fs aliased', `import fs from 'fs'; const f = fs; f.writeFileSync('/x', 'y');`, 'fs_escape'],
    ['fs passed on', `import fs from 'fs'; helper(fs);`, 'fs_escape'],
    ['fs[k]', `import fs from 'fs'; const k = pick(); fs[k]('/x', 'y');`, 'fs_escape'],
    ["fs['write'+'File']", `import fs from 'fs'; fs['write' + 'FileSync']('/x', 'y');`, 'fs_escape'],
    ['import(fs)', `const fs = await import('node:fs');`, 'fs_escape'],
    ['re-export fs', `export { writeFileSync } from 'fs';`, 'fs_escape'],
    // not JavaScript
    ['syntax error', `export function (`, 'parse_error'],
    ['with statement (strict)', `with (Math) { max(1, 2); }`, 'parse_error'],
  ];

  it.each(cases)('%s', (_label, src, rule) => {
    const r = checkToolSource(src);
    expect(r.ok).toBe(false);
    expect(r.violations.map((v) => v.rule)).toContain(rule);
    for (const v of r.violations) {
      expect(v.message.length).toBeGreaterThan(10);
      expect(v.line).toBeGreaterThanOrEqual(1);
    }
  });

  it('reports every violation of a file with its line and column', () => {
    const r = checkToolSource(`import fs from 'fs';\nconst x = 1;\n  eval('x');\nfs.rmSync('/');\n`);
    expect(r.violations).toEqual([
      expect.objectContaining({ rule: 'forbidden_global', line: 3, column: 3 }),
      expect.objectContaining({ rule: 'fs_write', line: 4, column: 1 }),
    ]);
    expect(formatViolations(r)).toMatch(/^3:3 forbidden_global: 'eval' is forbidden/);
  });
});

// ---- property tests ----------------------------------------------------------------------------

/** Split a word into 2–4 non-empty pieces. */
const pieces = (word: string) =>
  fc
    .uniqueArray(fc.integer({ min: 1, max: word.length - 1 }), {
      minLength: 1,
      maxLength: Math.min(3, word.length - 1),
    })
    .map((cuts) => {
      const sorted = [...cuts].sort((a, b) => a - b);
      const out: string[] = [];
      let prev = 0;
      for (const c of [...sorted, word.length]) {
        out.push(word.slice(prev, c));
        prev = c;
      }
      return out;
    });

/** Ways to spell a string at run time from its pieces. */
const spellings = (parts: string[]): string[] => [
  parts.map((p) => JSON.stringify(p)).join(' + '),
  `[${parts.map((p) => JSON.stringify(p)).join(', ')}].join('')`,
  `${JSON.stringify(parts[0])}.concat(${parts
    .slice(1)
    .map((p) => JSON.stringify(p))
    .join(', ')})`,
  `\`${parts[0]}\${${JSON.stringify(parts.slice(1).join(''))}}\``,
  `String.fromCharCode(${[...parts.join('')].map((c) => c.charCodeAt(0)).join(', ')})`,
];

describe('property: forbidden names spelled at run time are always refused', () => {
  const targets = ['eval', 'Function', 'constructor', 'child_process', 'binding', 'writeFileSync'];
  const holders = ['globalThis', 'global', 'self', 'process', '(() => {})', '({})', 'fs', 'obj'];

  it('computed member access with an assembled name', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...targets),
        fc.constantFrom(...holders),
        fc.nat(4),
        fc.boolean(),
        (target, holder, how, viaVariable) =>
          fc.assert(
            fc.property(pieces(target), (parts) => {
              const expr = spellings(parts)[how]!;
              const src = `import fs from 'fs';\nconst obj = {};\n${viaVariable ? `const k = ${expr};\n${holder}[k]('x');` : `${holder}[${expr}]('x');`}`;
              const r = checkToolSource(src);
              return (
                !r.ok && r.violations.some((v) => ['dynamic_member', 'fs_escape', 'global_escape'].includes(v.rule))
              );
            }),
            { numRuns: 5 },
          ),
      ),
      { numRuns: 60 },
    );
  });

  it('require / import() of an assembled module name', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('child_process', 'net', 'vm', 'worker_threads', 'fs'),
        fc.nat(4),
        fc.boolean(),
        (mod, how, useImport) =>
          fc.assert(
            fc.property(pieces(mod), (parts) => {
              const expr = spellings(parts)[how]!;
              const r = checkToolSource(useImport ? `await import(${expr});` : `require(${expr});`);
              return !r.ok && r.violations.some((v) => v.rule === (useImport ? 'dynamic_import' : 'dynamic_require'));
            }),
            { numRuns: 5 },
          ),
      ),
      { numRuns: 40 },
    );
  });

  it('aliasing chains of any length still refuse eval, Function, process and globalThis', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('eval', 'Function', 'process', 'globalThis', 'require'),
        fc.integer({ min: 1, max: 5 }),
        (name, depth) => {
          const lines = [`const a0 = ${name};`];
          for (let i = 1; i <= depth; i++) lines.push(`const a${i} = a${i - 1};`);
          lines.push(`a${depth}('x');`);
          const r = checkToolSource(lines.join('\n'));
          return (
            !r.ok && r.violations.some((v) => ['forbidden_global', 'global_escape', 'require_alias'].includes(v.rule))
          );
        },
      ),
    );
  });
});

describe('property: safe tools pass', () => {
  const ident = fc.constantFrom('count', 'total', 'items', 'word', 'value', 'acc', 'result');
  const stmt = fc.oneof(
    fc.tuple(ident, fc.integer({ min: 0, max: 99 })).map(([v, n]) => `let ${v}_${n} = ${n};`),
    ident.map((v) => `for (const ${v} of input) { out.push(${v}); }`),
    ident.map((v) => `const ${v}Map = {}; for (const k of Object.keys(input)) { ${v}Map[k] = (${v}Map[k] ?? 0) + 1; }`),
    ident.map((v) => `const ${v}s = input.map((x, i) => input[i + 1] ?? x).filter(Boolean);`),
    ident.map((v) => `const ${v}Up = String(input).toUpperCase().split(',');`),
    ident.map((v) => `const ${v}Json = JSON.parse(JSON.stringify({ ${v}: input.length }));`),
    ident.map((v) => `if (input.length > 3) { out.push(Math.max(...input.map(Number)), '${v}'); }`),
    fc.constant(`out.push(process.env.HOME ?? '', path.join('a', 'b'));`),
    fc.constant(`out.push(createHash('sha1').update(String(input)).digest('hex'));`),
  );

  it('random compositions of ordinary statements are accepted', () => {
    fc.assert(
      fc.property(fc.array(stmt, { minLength: 1, maxLength: 8 }), (body) => {
        const src = [
          `import path from 'node:path';`,
          `import { createHash } from 'node:crypto';`,
          `export function run(input) {`,
          `  const out = [];`,
          ...body.map((s, i) => `  { ${s.replace(/\b(let|const) (\w+)/, `$1 $2_${i}`)} }`),
          `  return out;`,
          `}`,
        ].join('\n');
        const r = checkToolSource(src);
        if (!r.ok) throw new Error(`${formatViolations(r)}\n${src}`);
        return true;
      }),
      { numRuns: 200 },
    );
  });
});
