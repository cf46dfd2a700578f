/**
 * Static safety check of a generated tool (Ouroboros): parse the module with acorn
 * and walk the AST — never regex — refusing process spawning, raw network, filesystem
 * writes, dynamic evaluation and the escape hatches around them. It fails closed: anything
 * dynamic where a name matters (a computed property built at run time, `require`/`import()`
 * of a non-literal, a global object used as a value) is a violation, because it cannot be
 * checked. The sandbox (no network, read-only root, seccomp) is the second line, not this.
 * Pure and deterministic: same source, same report.
 */
import { parse, type Node as AcornNode } from 'acorn';

const violationRules = [
  'parse_error',
  'forbidden_module',
  'unknown_module',
  'dynamic_import',
  'dynamic_require',
  'require_alias',
  'forbidden_global',
  'global_escape',
  'process_binding',
  'forbidden_member',
  'dynamic_member',
  'reflection',
  'fs_write',
  'fs_escape',
  'suspicious_string',
] as const;
export type ViolationRule = (typeof violationRules)[number];

interface SafetyViolation {
  rule: ViolationRule;
  message: string;
  line: number;
  column: number;
}

export interface SafetyReport {
  ok: boolean;
  violations: SafetyViolation[];
}

/** Modules no generated tool may load: process spawning, raw network, code loading, native bindings. */
const forbiddenModules = [
  'child_process',
  'net',
  'http',
  'https',
  'http2',
  'dgram',
  'tls',
  'dns',
  'worker_threads',
  'vm',
  'cluster',
  'module',
  'inspector',
  'v8',
  'repl',
  'process',
  'wasi',
  'trace_events',
] as const;

/** Modules a tool may import (pure computation); `fs` only through its read functions. */
const allowedModules = [
  'assert',
  'assert/strict',
  'buffer',
  'crypto',
  'events',
  'node:test',
  'path',
  'path/posix',
  'querystring',
  'string_decoder',
  'url',
  'util',
  'zlib',
  'fs',
  'fs/promises',
] as const;

/** The only `fs` members a tool may touch; everything else (writes, open, promises.* writes) is refused. */
const fsReadMembers = [
  'readFile',
  'readFileSync',
  'readdir',
  'readdirSync',
  'stat',
  'statSync',
  'lstat',
  'lstatSync',
  'existsSync',
  'access',
  'accessSync',
  'realpath',
  'realpathSync',
  'createReadStream',
  'constants',
] as const;

/** Globals that evaluate code or reach the network. */
const forbiddenGlobals: Record<string, string> = {
  eval: 'evaluates code',
  Function: 'compiles code (new Function / Function())',
  fetch: 'reaches the network',
  WebSocket: 'reaches the network',
  EventSource: 'reaches the network',
  XMLHttpRequest: 'reaches the network',
  WebAssembly: 'compiles native code',
  Reflect: 'gives reflective access by run-time names',
  Proxy: 'intercepts property access',
};

/** Names that stand for the global object; `globalThis.x` is treated as `x`. */
const globalObjects = new Set(['globalThis', 'global', 'self', 'window']);
/** `process.<member>` a tool may use; `binding`, `dlopen`, `mainModule`… are refused. */
const processMembers = new Set([
  'env',
  'argv',
  'exit',
  'exitCode',
  'stdout',
  'stderr',
  'hrtime',
  'nextTick',
  'platform',
  'arch',
  'version',
  'versions',
  'cwd',
  'memoryUsage',
  'uptime',
  'pid',
]);
/** Properties that lead to the Function constructor or the prototype chain, wherever they appear. */
const forbiddenMembers = new Set([
  'constructor',
  '__proto__',
  '__defineGetter__',
  '__defineSetter__',
  '__lookupGetter__',
  '__lookupSetter__',
  'caller',
  'callee',
  'binding',
  '_linkedBinding',
  'dlopen',
  'mainModule',
]);
/** `Object.<member>` calls that read properties by run-time name or swap prototypes. */
const reflectiveObjectMembers = new Set([
  'getOwnPropertyDescriptor',
  'getOwnPropertyDescriptors',
  'getOwnPropertyNames',
  'getOwnPropertySymbols',
  'getPrototypeOf',
  'setPrototypeOf',
  'defineProperty',
  'defineProperties',
]);
/** A string literal with exactly one of these values is refused: it only serves to build a forbidden name. */
const suspiciousStrings = new Set([
  ...Object.keys(forbiddenGlobals),
  ...forbiddenMembers,
  ...forbiddenModules.filter((m) => m !== 'process' && m !== 'module' && m !== 'net' && m !== 'tls' && m !== 'dns'),
  'require',
  'globalThis',
]);
/** Method calls whose result is a string built at run time (for computed keys). */
const stringBuilders = new Set([
  'fromCharCode',
  'fromCodePoint',
  'atob',
  'btoa',
  'join',
  'concat',
  'reverse',
  'toString',
  'replace',
  'replaceAll',
  'slice',
  'substring',
  'substr',
  'toLowerCase',
  'toUpperCase',
  'trim',
  'repeat',
  'padStart',
  'padEnd',
  'decodeURIComponent',
  'decodeURI',
  'unescape',
  'raw',
  'String',
]);

// A minimal ESTree view: acorn's Node plus the fields we read.
interface N extends AcornNode {
  [key: string]: unknown;
}
type Segment = { name: string } | { dynamic: true };

/** Normalise `node:fs` → `fs`. */
function moduleBase(specifier: string): string {
  return specifier.startsWith('node:') ? specifier.slice(5) : specifier;
}

/** What one check collects while it walks the module: every node, their parents, what names hold, the violations. */
interface Scan {
  all: N[];
  parents: Map<N, { parent: N; key: string }>;
  /** Bindings that hold `fs` (or `fs.promises`). */
  fsBindings: Set<string>;
  /** Identifiers that hold strings. */
  stringy: Set<string>;
  /** Identifiers that hold a string assembled from literal fragments at run time ('con' + 'structor'). */
  tainted: Set<string>;
  violations: SafetyViolation[];
}

/** Check an ES module's source. Never throws: a parse error is a violation. */
export function checkToolSource(source: string): SafetyReport {
  const parsed = parseModule(source);
  if ('report' in parsed) return parsed.report;
  const s: Scan = {
    all: [],
    parents: new Map(),
    fsBindings: new Set(),
    stringy: new Set(),
    tainted: new Set(),
    violations: [],
  };
  collect(parsed.ast, undefined, '', s.parents, s.all);
  trackStrings(s);
  trackFsImports(s);
  for (const node of s.all) checkNode(s, node);
  return { ok: s.violations.length === 0, violations: dedupe(s.violations) };
}

function parseModule(source: string): { ast: N } | { report: SafetyReport } {
  try {
    return {
      ast: parse(source, {
        ecmaVersion: 'latest',
        sourceType: 'module',
        locations: true,
        allowHashBang: true,
      }) as unknown as N,
    };
  } catch (err) {
    const loc = (err as { loc?: { line: number; column: number } }).loc;
    return {
      report: {
        ok: false,
        violations: [
          {
            rule: 'parse_error',
            message: `not a valid ES module: ${(err as Error).message}`,
            line: loc?.line ?? 0,
            column: loc?.column ?? 0,
          },
        ],
      },
    };
  }
}

function add(s: Scan, node: N, rule: ViolationRule, message: string): void {
  const loc = (node as unknown as { loc?: { start: { line: number; column: number } } }).loc;
  s.violations.push({ rule, message, line: loc?.start.line ?? 0, column: (loc?.start.column ?? 0) + 1 });
}

/**
 * Bindings that hold `fs` (`require('fs')`); identifiers that hold strings (`stringy`), and
 * those that hold a string assembled from literal fragments at run time (`tainted`). Three
 * passes, so a name assigned from another name declared later is followed too.
 */
function trackStrings(s: Scan): void {
  for (let pass = 0; pass < 3; pass++) {
    for (const node of s.all) {
      let target: N | undefined;
      let value: N | undefined;
      if (node.type === 'VariableDeclarator' && node.init) [target, value] = [node.id as N, node.init as N];
      else if (node.type === 'AssignmentExpression') [target, value] = [node.left as N, node.right as N];
      if (!target || !value || target.type !== 'Identifier') continue;
      const name = target.name as string;
      if (isFs(requiredModule(value))) s.fsBindings.add(name);
      const appends = node.type === 'AssignmentExpression' && node.operator === '+=';
      if (hasString(s, value) || (appends && s.stringy.has(name))) s.stringy.add(name);
      if (isAssembledString(s, value) || (appends && (s.stringy.has(name) || hasString(s, value)))) s.tainted.add(name);
    }
  }
}

/** `import fs`, `import * as fs`, `import { promises }`, `const { promises } = require('fs')`: namespaces whose members are checked. */
function trackFsImports(s: Scan): void {
  for (const node of s.all) {
    if (node.type === 'ImportDeclaration' && isFs(literalString(node.source as N))) {
      for (const spec of node.specifiers as N[]) {
        const name = spec.type === 'ImportSpecifier' ? importedName(spec) : 'default';
        if (name === 'default' || name === 'promises') s.fsBindings.add((spec.local as N).name as string);
      }
    }
    if (
      node.type === 'VariableDeclarator' &&
      node.init &&
      isFs(requiredModule(node.init as N)) &&
      (node.id as N).type === 'ObjectPattern'
    ) {
      for (const p of (node.id as N).properties as N[]) {
        if (
          p.type === 'Property' &&
          !p.computed &&
          propertyKeyName(p.key as N) === 'promises' &&
          (p.value as N).type === 'Identifier'
        ) {
          s.fsBindings.add((p.value as N).name as string);
        }
      }
    }
  }
}

function checkNode(s: Scan, node: N): void {
  switch (node.type) {
    case 'ImportDeclaration':
    case 'ExportAllDeclaration':
    case 'ExportNamedDeclaration':
      return checkModuleDeclaration(s, node);
    case 'ImportExpression': {
      const spec = literalString(node.source as N);
      if (spec === undefined)
        return add(s, node, 'dynamic_import', 'import() of a module name computed at run time cannot be checked');
      checkModule(s, node, spec);
      if (isFs(spec))
        add(s, node, 'fs_escape', `import('${spec}') is not allowed; import its read functions statically`);
      return;
    }
    case 'Literal':
      if (typeof node.value === 'string' && suspiciousStrings.has(node.value) && !isModuleSpecifier(s, node)) {
        add(s, node, 'suspicious_string', `the string '${node.value}' names a forbidden capability`);
      }
      return;
    case 'TemplateElement': {
      const cooked = (node.value as { cooked?: string }).cooked;
      if (cooked !== undefined && suspiciousStrings.has(cooked))
        add(s, node, 'suspicious_string', `the string '${cooked}' names a forbidden capability`);
      return;
    }
    case 'MemberExpression':
      return checkMember(s, node);
    case 'Identifier':
      return checkIdentifier(s, node);
    case 'CallExpression':
      if (isRequireCall(node)) checkRequireCall(s, node);
      return;
  }
}

// ---- rules ------------------------------------------------------------------------------------

/** `import … from`, `export … from`: the module, and for `fs` the imported names. */
function checkModuleDeclaration(s: Scan, node: N): void {
  if (!node.source) return;
  const spec = literalString(node.source as N);
  if (spec === undefined) return;
  checkModule(s, node, spec);
  if (node.type === 'ImportDeclaration' && isFs(spec)) {
    for (const specifier of node.specifiers as N[]) {
      if (specifier.type === 'ImportSpecifier') checkFsMember(s, specifier, importedName(specifier));
    }
  }
  if (node.type !== 'ImportDeclaration' && isFs(spec))
    add(s, node, 'fs_escape', `re-exporting '${spec}' is not allowed`);
}

function checkRequireCall(s: Scan, node: N): void {
  const spec = literalString((node.arguments as N[])[0]);
  if ((node.arguments as N[]).length !== 1 || spec === undefined) {
    return add(s, node, 'dynamic_require', 'require() of a module name computed at run time cannot be checked');
  }
  checkModule(s, node, spec);
  if (isFs(spec)) checkFsUse(s, node);
}

function checkModule(s: Scan, node: N, spec: string): void {
  const base = moduleBase(spec);
  const root = base.split('/')[0] ?? base;
  if ((forbiddenModules as readonly string[]).includes(root)) {
    add(
      s,
      node,
      'forbidden_module',
      `module '${spec}' is forbidden (process spawning, network, code loading or native access)`,
    );
  } else if (spec.startsWith('./') && /^\.\/[\w.-]+\.m?js$/.test(spec)) {
    // The tool's own module, imported by its tests.
  } else if (
    !(allowedModules as readonly string[]).includes(base) &&
    !(allowedModules as readonly string[]).includes(spec)
  ) {
    add(
      s,
      node,
      'unknown_module',
      `module '${spec}' is not on the allow-list (${allowedModules.join(', ')}, or ./<file>.mjs)`,
    );
  }
}

function checkFsMember(s: Scan, node: N, name: string | undefined): void {
  if (name === undefined) add(s, node, 'fs_escape', 'fs accessed by a name computed at run time');
  else if (!(fsReadMembers as readonly string[]).includes(name) && name !== 'promises' && name !== 'default') {
    add(s, node, 'fs_write', `fs.${name} is not allowed: a tool may only read (${fsReadMembers.join(', ')})`);
  }
}

/** A value that is fs (a binding or `require('fs')`): only `fs.<read>` / `fs.promises.<read>`. */
function checkFsUse(s: Scan, node: N): void {
  const up = s.parents.get(node);
  if (up && up.parent.type === 'MemberExpression' && up.key === 'object') {
    const seg = segmentOf(up.parent);
    if ('dynamic' in seg) return add(s, up.parent, 'fs_escape', 'fs accessed by a name computed at run time');
    if (seg.name === 'promises') {
      const up2 = s.parents.get(up.parent);
      if (up2 && up2.parent.type === 'MemberExpression' && up2.key === 'object') {
        const seg2 = segmentOf(up2.parent);
        return checkFsMember(s, up2.parent, 'dynamic' in seg2 ? undefined : seg2.name);
      }
      return add(s, up.parent, 'fs_escape', 'fs.promises used as a value (aliasing it hides writes)');
    }
    return checkFsMember(s, up.parent, seg.name);
  }
  if (node.type === 'CallExpression' && up && up.parent.type === 'VariableDeclarator' && up.key === 'init') {
    const id = up.parent.id as N;
    if (id.type === 'Identifier') return; // `const fs = require('fs')`: tracked as an fs binding
    if (id.type === 'ObjectPattern') {
      for (const p of id.properties as N[]) {
        if (p.type !== 'Property' || p.computed)
          add(s, p, 'fs_escape', 'fs destructured by a computed or rest pattern');
        else checkFsMember(s, p, propertyKeyName(p.key as N));
      }
      return;
    }
  }
  add(s, node, 'fs_escape', 'fs used as a value (aliasing or passing it hides writes); call fs.<read>() directly');
}

function checkIdentifier(s: Scan, node: N): void {
  const up = s.parents.get(node);
  if (!up || !isReference(node, up.parent, up.key)) return;
  const name = node.name as string;
  if (s.fsBindings.has(name) && !isDeclarationSite(up.parent, up.key)) return checkFsUse(s, node);
  if (name === 'require') {
    if (up.parent.type === 'CallExpression' && up.key === 'callee') return; // checked as a call
    return add(s, node, 'require_alias', 'require may only be called directly with a literal module name');
  }
  if (name in forbiddenGlobals)
    return add(s, node, 'forbidden_global', `'${name}' is forbidden: it ${forbiddenGlobals[name]}`);
  if (name === 'Object' && up.parent.type === 'MemberExpression' && up.key === 'object') {
    const seg = segmentOf(up.parent);
    if ('dynamic' in seg) return add(s, up.parent, 'dynamic_member', 'Object accessed by a name computed at run time');
    if (reflectiveObjectMembers.has(seg.name))
      return add(s, up.parent, 'reflection', `Object.${seg.name} reads or rewires properties by run-time name`);
    return;
  }
  if (globalObjects.has(name) || name === 'process' || name === 'module' || name === 'exports')
    checkGlobalChain(s, node, name);
}

/** `globalThis.a.b`, `process.env`, `module.exports`: resolve the chain and check its root. */
function checkGlobalChain(s: Scan, node: N, name: string): void {
  const chain: Segment[] = [{ name }];
  let cur = node;
  let top = node;
  for (;;) {
    const up = s.parents.get(cur);
    if (!up || up.parent.type !== 'MemberExpression' || up.key !== 'object') break;
    chain.push(segmentOf(up.parent));
    cur = up.parent;
    top = up.parent;
  }
  while (chain.length > 1 && 'name' in chain[0]! && globalObjects.has(chain[0].name)) chain.shift();
  const root = chain[0]!;
  if ('dynamic' in root)
    return add(s, top, 'dynamic_member', `${name}[…] with a name computed at run time cannot be checked`);
  if (chain.length === 1 && (globalObjects.has(root.name) || root.name === 'process' || root.name === 'module')) {
    return add(
      s,
      node,
      'global_escape',
      `'${root.name}' used as a value (aliasing or passing it); only ${root.name}.<member> is allowed`,
    );
  }
  if (root.name in forbiddenGlobals)
    return add(s, top, 'forbidden_global', `'${root.name}' is forbidden: it ${forbiddenGlobals[root.name]}`);
  if (root.name === 'require') return add(s, top, 'require_alias', 'require reached through the global object');
  const second = chain[1];
  if (root.name === 'process' && checkProcessMember(s, node, top, second)) return;
  if (root.name === 'module' && (!second || 'dynamic' in second || second.name !== 'exports')) {
    return add(s, top, 'forbidden_member', 'only module.exports is allowed');
  }
  if (root.name !== name && s.fsBindings.has(root.name))
    add(s, top, 'fs_escape', 'fs reached through the global object');
}

/** `process.<member>`: only the allowed members; `binding`, `dlopen`… load native code. Returns whether it found a violation. */
function checkProcessMember(s: Scan, node: N, top: N, second: Segment | undefined): boolean {
  if (!second) add(s, node, 'global_escape', "'process' used as a value; only process.<member> is allowed");
  else if ('dynamic' in second)
    add(s, top, 'dynamic_member', 'process[…] with a name computed at run time cannot be checked');
  else if (second.name === 'binding' || second.name === 'dlopen' || second.name === '_linkedBinding')
    add(s, top, 'process_binding', `process.${second.name} loads native code`);
  else if (!processMembers.has(second.name))
    add(
      s,
      top,
      'forbidden_member',
      `process.${second.name} is not allowed (allowed: ${[...processMembers].join(', ')})`,
    );
  else return false;
  return true;
}

function checkMember(s: Scan, node: N): void {
  const seg = segmentOf(node);
  if ('name' in seg) {
    if (forbiddenMembers.has(seg.name))
      add(
        s,
        node,
        'forbidden_member',
        `.${seg.name} is forbidden (it reaches constructors, prototypes or native bindings)`,
      );
    return;
  }
  const key = node.property as N;
  if (isAssembledString(s, key))
    add(s, node, 'dynamic_member', 'a property name assembled from string pieces at run time cannot be checked');
  else if (key.type === 'Identifier' && s.tainted.has(key.name as string)) {
    add(
      s,
      node,
      'dynamic_member',
      `'${key.name as string}' holds a string built at run time; it cannot be used as a property name`,
    );
  }
}

// ---- helpers ----------------------------------------------------------------------------------

function isModuleSpecifier(s: Scan, node: N): boolean {
  const up = s.parents.get(node);
  if (!up) return false;
  if (up.key === 'source' && /Import|Export/.test(up.parent.type)) return true;
  return up.parent.type === 'CallExpression' && isRequireCall(up.parent);
}

/** A string literal, or a template literal without expressions. */
function literalString(node: N | undefined): string | undefined {
  if (!node) return undefined;
  if (node.type === 'Literal' && typeof node.value === 'string') return node.value;
  if (node.type === 'TemplateLiteral' && (node.expressions as N[]).length === 0) {
    return ((node.quasis as N[])[0]?.value as { cooked?: string } | undefined)?.cooked ?? undefined;
  }
  return undefined;
}

function requiredModule(node: N): string | undefined {
  return node.type === 'CallExpression' && isRequireCall(node) ? literalString((node.arguments as N[])[0]) : undefined;
}

function segmentOf(member: N): Segment {
  const p = member.property as N;
  if (!member.computed) return { name: p.type === 'PrivateIdentifier' ? `#${p.name as string}` : (p.name as string) };
  const lit = literalString(p);
  if (lit !== undefined) return { name: lit };
  if (p.type === 'Literal' && typeof p.value === 'number') return { name: String(p.value) };
  return { dynamic: true };
}

/** The name a call calls: `f(…)` → f, `x.f(…)` → f; undefined for anything computed. */
function calleeName(node: N): unknown {
  const callee = node.callee as N;
  return callee.type === 'Identifier'
    ? callee.name
    : callee.type === 'MemberExpression' && !callee.computed
      ? (callee.property as N).name
      : undefined;
}

/** An expression that builds a string at run time: concatenation, template, string method, conditional… */
function isBuiltString(s: Scan, node: N): boolean {
  switch (node.type) {
    case 'TemplateLiteral':
      return (node.expressions as N[]).length > 0;
    case 'TaggedTemplateExpression':
      return true;
    case 'BinaryExpression':
      return node.operator === '+' && (hasString(s, node.left as N) || hasString(s, node.right as N));
    case 'CallExpression': {
      const name = calleeName(node);
      return typeof name === 'string' && stringBuilders.has(name);
    }
    case 'ConditionalExpression':
      return hasString(s, node.consequent as N) || hasString(s, node.alternate as N);
    case 'LogicalExpression':
      return hasString(s, node.left as N) || hasString(s, node.right as N);
    case 'SequenceExpression':
    case 'AssignmentExpression':
      return true;
    default:
      return false;
  }
}

function hasString(s: Scan, node: N): boolean {
  if (node.type === 'Literal') return typeof node.value === 'string';
  if (node.type === 'Identifier') return s.stringy.has(node.name as string);
  return node.type === 'TemplateLiteral' || isBuiltString(s, node);
}

/**
 * A string built at run time from literal pieces (or character codes): the way to spell a
 * forbidden name without writing it. `counts[word.toLowerCase()]` has no literal piece and
 * passes; `obj['con' + 'structor']` and `obj[['con','structor'].join('')]` do not.
 */
function isAssembledString(s: Scan, node: N): boolean {
  if (node.type === 'Identifier') return s.tainted.has(node.name as string);
  return isBuiltString(s, node) && hasFragment(s, node);
}

/** Calls that turn codes or encodings into characters: a fragment of a name by themselves. */
const decoders = new Set(['fromCharCode', 'fromCodePoint', 'atob', 'unescape', 'decodeURIComponent', 'decodeURI']);

function hasFragment(s: Scan, node: N): boolean {
  if (node.type === 'Literal') return typeof node.value === 'string' || typeof node.value === 'number';
  if (node.type === 'TemplateElement') return Boolean((node.value as { cooked?: string }).cooked);
  if (node.type === 'ArrayExpression') return true;
  if (node.type === 'Identifier') return s.stringy.has(node.name as string) || s.tainted.has(node.name as string);
  if (node.type === 'CallExpression') {
    const name = calleeName(node);
    if (typeof name === 'string' && decoders.has(name)) return true;
  }
  for (const [k, v] of Object.entries(node)) {
    if (k === 'loc') continue;
    if (Array.isArray(v)) {
      if (v.some((c) => c && typeof c === 'object' && typeof (c as N).type === 'string' && hasFragment(s, c as N)))
        return true;
    } else if (v && typeof v === 'object' && typeof (v as N).type === 'string' && hasFragment(s, v as N)) return true;
  }
  return false;
}

function isFs(spec: string | undefined): boolean {
  if (spec === undefined) return false;
  const base = moduleBase(spec);
  return base === 'fs' || base === 'fs/promises';
}

function isRequireCall(node: N): boolean {
  const callee = node.callee as N;
  return callee.type === 'Identifier' && callee.name === 'require';
}

function importedName(spec: N): string | undefined {
  const imported = spec.imported as N;
  return imported.type === 'Identifier'
    ? (imported.name as string)
    : typeof imported.value === 'string'
      ? imported.value
      : undefined;
}

function propertyKeyName(key: N): string | undefined {
  if (key.type === 'Identifier') return key.name as string;
  if (key.type === 'Literal') return String(key.value);
  return undefined;
}

/** Is this Identifier a reference (or a binding) rather than a property key, label or import name? */
function isReference(node: N, parent: N, key: string): boolean {
  switch (parent.type) {
    case 'MemberExpression':
      return key === 'object' || parent.computed === true;
    case 'Property':
    case 'MethodDefinition':
    case 'PropertyDefinition':
      return key !== 'key' || parent.computed === true;
    case 'LabeledStatement':
    case 'BreakStatement':
    case 'ContinueStatement':
    case 'MetaProperty':
      return false;
    case 'ImportSpecifier':
    case 'ImportDefaultSpecifier':
    case 'ImportNamespaceSpecifier':
      return false;
    case 'ExportSpecifier':
      return key === 'local';
    default:
      return node.type === 'Identifier';
  }
}

function isDeclarationSite(parent: N, key: string): boolean {
  return parent.type === 'VariableDeclarator' && key === 'id';
}

function collect(
  node: N,
  parent: N | undefined,
  key: string,
  parents: Map<N, { parent: N; key: string }>,
  out: N[],
): void {
  out.push(node);
  if (parent) parents.set(node, { parent, key });
  for (const [k, v] of Object.entries(node)) {
    if (k === 'loc' || k === 'start' || k === 'end' || k === 'range') continue;
    if (Array.isArray(v)) {
      for (const c of v)
        if (c && typeof c === 'object' && typeof (c as N).type === 'string') collect(c as N, node, k, parents, out);
    } else if (v && typeof v === 'object' && typeof (v as N).type === 'string') {
      collect(v as N, node, k, parents, out);
    }
  }
}

function dedupe(vs: SafetyViolation[]): SafetyViolation[] {
  const seen = new Set<string>();
  return vs
    .filter((v) => {
      const k = `${v.rule}:${v.line}:${v.column}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    })
    .sort((a, b) => a.line - b.line || a.column - b.column);
}

/** One line per violation, for logs, notes and the audit row. */
export function formatViolations(report: SafetyReport): string {
  return report.violations.map((v) => `${v.line}:${v.column} ${v.rule}: ${v.message}`).join('\n');
}
