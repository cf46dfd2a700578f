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

export const violationRules = [
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

export interface SafetyViolation {
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
export const forbiddenModules = [
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
export const allowedModules = [
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
export const fsReadMembers = [
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
export function moduleBase(specifier: string): string {
  return specifier.startsWith('node:') ? specifier.slice(5) : specifier;
}

/** Check an ES module's source. Never throws: a parse error is a violation. */
export function checkToolSource(source: string): SafetyReport {
  let ast: N;
  try {
    ast = parse(source, { ecmaVersion: 'latest', sourceType: 'module', locations: true, allowHashBang: true }) as unknown as N;
  } catch (err) {
    const loc = (err as { loc?: { line: number; column: number } }).loc;
    return {
      ok: false,
      violations: [{ rule: 'parse_error', message: `not a valid ES module: ${(err as Error).message}`, line: loc?.line ?? 0, column: loc?.column ?? 0 }],
    };
  }
  const violations: SafetyViolation[] = [];
  const parents = new Map<N, { parent: N; key: string }>();
  const all: N[] = [];
  collect(ast, undefined, '', parents, all);

  const add = (node: N, rule: ViolationRule, message: string) => {
    const loc = (node as unknown as { loc?: { start: { line: number; column: number } } }).loc;
    violations.push({ rule, message, line: loc?.start.line ?? 0, column: (loc?.start.column ?? 0) + 1 });
  };
  const parentOf = (n: N) => parents.get(n);

  // Pass 1: bindings that hold `fs`; identifiers that hold strings (`stringy`), and those that
  // hold a string assembled from literal fragments at run time (`tainted`: 'con' + 'structor').
  const fsBindings = new Set<string>();
  const stringy = new Set<string>();
  const tainted = new Set<string>();
  for (let pass = 0; pass < 3; pass++) {
    for (const node of all) {
      let target: N | undefined;
      let value: N | undefined;
      if (node.type === 'VariableDeclarator' && node.init) [target, value] = [node.id as N, node.init as N];
      else if (node.type === 'AssignmentExpression') [target, value] = [node.left as N, node.right as N];
      if (!target || !value || target.type !== 'Identifier') continue;
      const name = target.name as string;
      if (isFs(requiredModule(value))) fsBindings.add(name);
      const appends = node.type === 'AssignmentExpression' && node.operator === '+=';
      if (hasString(value) || (appends && stringy.has(name))) stringy.add(name);
      if (isAssembledString(value) || (appends && (stringy.has(name) || hasString(value)))) tainted.add(name);
    }
  }
  for (const node of all) {
    if (node.type === 'ImportDeclaration' && isFs(literalString(node.source as N))) {
      for (const s of node.specifiers as N[]) {
        const name = s.type === 'ImportSpecifier' ? importedName(s) : 'default';
        // `import fs`, `import * as fs`, `import { promises }`: namespaces whose members are checked.
        if (name === 'default' || name === 'promises') fsBindings.add((s.local as N).name as string);
      }
    }
    if (node.type === 'VariableDeclarator' && node.init && isFs(requiredModule(node.init as N)) && (node.id as N).type === 'ObjectPattern') {
      for (const p of (node.id as N).properties as N[]) {
        if (p.type === 'Property' && !p.computed && propertyKeyName(p.key as N) === 'promises' && (p.value as N).type === 'Identifier') {
          fsBindings.add((p.value as N).name as string);
        }
      }
    }
  }

  for (const node of all) {
    switch (node.type) {
      case 'ImportDeclaration':
      case 'ExportAllDeclaration':
      case 'ExportNamedDeclaration': {
        if (!node.source) break;
        const spec = literalString(node.source as N);
        if (spec === undefined) break;
        checkModule(node, spec);
        if (node.type === 'ImportDeclaration' && isFs(spec)) {
          for (const s of node.specifiers as N[]) {
            if (s.type === 'ImportSpecifier') checkFsMember(s, importedName(s));
          }
        }
        if (node.type !== 'ImportDeclaration' && isFs(spec)) add(node, 'fs_escape', `re-exporting '${spec}' is not allowed`);
        break;
      }
      case 'ImportExpression': {
        const spec = literalString(node.source as N);
        if (spec === undefined) add(node, 'dynamic_import', 'import() of a module name computed at run time cannot be checked');
        else {
          checkModule(node, spec);
          if (isFs(spec)) add(node, 'fs_escape', `import('${spec}') is not allowed; import its read functions statically`);
        }
        break;
      }
      case 'Literal':
        if (typeof node.value === 'string' && suspiciousStrings.has(node.value) && !isModuleSpecifier(node)) {
          add(node, 'suspicious_string', `the string '${node.value}' names a forbidden capability`);
        }
        break;
      case 'TemplateElement': {
        const cooked = (node.value as { cooked?: string }).cooked;
        if (cooked !== undefined && suspiciousStrings.has(cooked)) add(node, 'suspicious_string', `the string '${cooked}' names a forbidden capability`);
        break;
      }
      case 'MemberExpression':
        checkMember(node);
        break;
      case 'Identifier':
        checkIdentifier(node);
        break;
      case 'CallExpression':
        if (isRequireCall(node)) {
          const spec = literalString((node.arguments as N[])[0]);
          if ((node.arguments as N[]).length !== 1 || spec === undefined) {
            add(node, 'dynamic_require', 'require() of a module name computed at run time cannot be checked');
          } else {
            checkModule(node, spec);
            if (isFs(spec)) checkFsUse(node);
          }
        }
        break;
    }
  }

  return { ok: violations.length === 0, violations: dedupe(violations) };

  // ---- rules ------------------------------------------------------------------------------------

  function checkModule(node: N, spec: string): void {
    const base = moduleBase(spec);
    const root = base.split('/')[0] ?? base;
    if ((forbiddenModules as readonly string[]).includes(root)) {
      add(node, 'forbidden_module', `module '${spec}' is forbidden (process spawning, network, code loading or native access)`);
    } else if (spec.startsWith('./') && /^\.\/[\w.-]+\.m?js$/.test(spec)) {
      // The tool's own module, imported by its tests.
    } else if (!(allowedModules as readonly string[]).includes(base) && !(allowedModules as readonly string[]).includes(spec)) {
      add(node, 'unknown_module', `module '${spec}' is not on the allow-list (${allowedModules.join(', ')}, or ./<file>.mjs)`);
    }
  }

  function checkFsMember(node: N, name: string | undefined): void {
    if (name === undefined) add(node, 'fs_escape', 'fs accessed by a name computed at run time');
    else if (!(fsReadMembers as readonly string[]).includes(name) && name !== 'promises' && name !== 'default') {
      add(node, 'fs_write', `fs.${name} is not allowed: a tool may only read (${fsReadMembers.join(', ')})`);
    }
  }

  /** A value that is fs (a binding or `require('fs')`): only `fs.<read>` / `fs.promises.<read>`. */
  function checkFsUse(node: N): void {
    const up = parentOf(node);
    if (up && up.parent.type === 'MemberExpression' && up.key === 'object') {
      const seg = segmentOf(up.parent);
      if ('dynamic' in seg) return add(up.parent, 'fs_escape', 'fs accessed by a name computed at run time');
      if (seg.name === 'promises') {
        const up2 = parentOf(up.parent);
        if (up2 && up2.parent.type === 'MemberExpression' && up2.key === 'object') {
          const seg2 = segmentOf(up2.parent);
          return checkFsMember(up2.parent, 'dynamic' in seg2 ? undefined : seg2.name);
        }
        return add(up.parent, 'fs_escape', 'fs.promises used as a value (aliasing it hides writes)');
      }
      return checkFsMember(up.parent, seg.name);
    }
    if (node.type === 'CallExpression' && up && up.parent.type === 'VariableDeclarator' && up.key === 'init') {
      const id = up.parent.id as N;
      if (id.type === 'Identifier') return; // `const fs = require('fs')`: tracked as an fs binding
      if (id.type === 'ObjectPattern') {
        for (const p of id.properties as N[]) {
          if (p.type !== 'Property' || p.computed) add(p, 'fs_escape', 'fs destructured by a computed or rest pattern');
          else checkFsMember(p, propertyKeyName(p.key as N));
        }
        return;
      }
    }
    add(node, 'fs_escape', 'fs used as a value (aliasing or passing it hides writes); call fs.<read>() directly');
  }

  function checkIdentifier(node: N): void {
    const up = parentOf(node);
    if (!up || !isReference(node, up.parent, up.key)) return;
    const name = node.name as string;
    if (fsBindings.has(name) && !isDeclarationSite(up.parent, up.key)) return checkFsUse(node);
    if (name === 'require') {
      if (up.parent.type === 'CallExpression' && up.key === 'callee') return; // checked as a call
      return add(node, 'require_alias', 'require may only be called directly with a literal module name');
    }
    if (name in forbiddenGlobals) return add(node, 'forbidden_global', `'${name}' is forbidden: it ${forbiddenGlobals[name]}`);
    if (name === 'Object' && up.parent.type === 'MemberExpression' && up.key === 'object') {
      const seg = segmentOf(up.parent);
      if ('dynamic' in seg) return add(up.parent, 'dynamic_member', 'Object accessed by a name computed at run time');
      if (reflectiveObjectMembers.has(seg.name)) return add(up.parent, 'reflection', `Object.${seg.name} reads or rewires properties by run-time name`);
      return;
    }
    if (globalObjects.has(name) || name === 'process' || name === 'module' || name === 'exports') checkGlobalChain(node, name);
  }

  /** `globalThis.a.b`, `process.env`, `module.exports`: resolve the chain and check its root. */
  function checkGlobalChain(node: N, name: string): void {
    const chain: Segment[] = [{ name }];
    let cur = node;
    let top = node;
    for (;;) {
      const up = parentOf(cur);
      if (!up || up.parent.type !== 'MemberExpression' || up.key !== 'object') break;
      chain.push(segmentOf(up.parent));
      cur = up.parent;
      top = up.parent;
    }
    while (chain.length > 1 && 'name' in chain[0]! && globalObjects.has(chain[0].name)) chain.shift();
    const root = chain[0]!;
    if ('dynamic' in root) return add(top, 'dynamic_member', `${name}[…] with a name computed at run time cannot be checked`);
    if (chain.length === 1 && (globalObjects.has(root.name) || root.name === 'process' || root.name === 'module')) {
      return add(node, 'global_escape', `'${root.name}' used as a value (aliasing or passing it); only ${root.name}.<member> is allowed`);
    }
    if (root.name in forbiddenGlobals) return add(top, 'forbidden_global', `'${root.name}' is forbidden: it ${forbiddenGlobals[root.name]}`);
    if (root.name === 'require') return add(top, 'require_alias', 'require reached through the global object');
    const second = chain[1];
    if (root.name === 'process') {
      if (!second) return add(node, 'global_escape', "'process' used as a value; only process.<member> is allowed");
      if ('dynamic' in second) return add(top, 'dynamic_member', 'process[…] with a name computed at run time cannot be checked');
      if (second.name === 'binding' || second.name === 'dlopen' || second.name === '_linkedBinding') {
        return add(top, 'process_binding', `process.${second.name} loads native code`);
      }
      if (!processMembers.has(second.name)) return add(top, 'forbidden_member', `process.${second.name} is not allowed (allowed: ${[...processMembers].join(', ')})`);
    }
    if (root.name === 'module' && (!second || 'dynamic' in second || second.name !== 'exports')) {
      return add(top, 'forbidden_member', 'only module.exports is allowed');
    }
    if (root.name !== name && fsBindings.has(root.name)) add(top, 'fs_escape', 'fs reached through the global object');
  }

  function checkMember(node: N): void {
    const seg = segmentOf(node);
    if ('name' in seg) {
      if (forbiddenMembers.has(seg.name)) add(node, 'forbidden_member', `.${seg.name} is forbidden (it reaches constructors, prototypes or native bindings)`);
      return;
    }
    const key = node.property as N;
    if (isAssembledString(key)) add(node, 'dynamic_member', 'a property name assembled from string pieces at run time cannot be checked');
    else if (key.type === 'Identifier' && tainted.has(key.name as string)) {
      add(node, 'dynamic_member', `'${key.name as string}' holds a string built at run time; it cannot be used as a property name`);
    }
  }

  // ---- helpers ----------------------------------------------------------------------------------

  function isModuleSpecifier(node: N): boolean {
    const up = parentOf(node);
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
    const s = literalString(p);
    if (s !== undefined) return { name: s };
    if (p.type === 'Literal' && typeof p.value === 'number') return { name: String(p.value) };
    return { dynamic: true };
  }

  /** An expression that builds a string at run time: concatenation, template, string method, conditional… */
  function isBuiltString(node: N): boolean {
    switch (node.type) {
      case 'TemplateLiteral':
        return (node.expressions as N[]).length > 0;
      case 'TaggedTemplateExpression':
        return true;
      case 'BinaryExpression':
        return node.operator === '+' && (hasString(node.left as N) || hasString(node.right as N));
      case 'CallExpression': {
        const callee = node.callee as N;
        const name = callee.type === 'Identifier' ? callee.name : callee.type === 'MemberExpression' && !callee.computed ? (callee.property as N).name : undefined;
        return typeof name === 'string' && stringBuilders.has(name);
      }
      case 'ConditionalExpression':
        return hasString(node.consequent as N) || hasString(node.alternate as N);
      case 'LogicalExpression':
        return hasString(node.left as N) || hasString(node.right as N);
      case 'SequenceExpression':
      case 'AssignmentExpression':
        return true;
      default:
        return false;
    }
  }

  function hasString(node: N): boolean {
    if (node.type === 'Literal') return typeof node.value === 'string';
    if (node.type === 'Identifier') return stringy.has(node.name as string);
    return node.type === 'TemplateLiteral' || isBuiltString(node);
  }

  /**
   * A string built at run time from literal pieces (or character codes): the way to spell a
   * forbidden name without writing it. `counts[word.toLowerCase()]` has no literal piece and
   * passes; `obj['con' + 'structor']` and `obj[['con','structor'].join('')]` do not.
   */
  function isAssembledString(node: N): boolean {
    if (node.type === 'Identifier') return tainted.has(node.name as string);
    return isBuiltString(node) && hasFragment(node);
  }

  function hasFragment(node: N): boolean {
    if (node.type === 'Literal') return typeof node.value === 'string' || typeof node.value === 'number';
    if (node.type === 'TemplateElement') return Boolean((node.value as { cooked?: string }).cooked);
    if (node.type === 'ArrayExpression') return true;
    if (node.type === 'Identifier') return stringy.has(node.name as string) || tainted.has(node.name as string);
    if (node.type === 'CallExpression') {
      const callee = node.callee as N;
      const name = callee.type === 'Identifier' ? callee.name : callee.type === 'MemberExpression' && !callee.computed ? (callee.property as N).name : undefined;
      if (name === 'fromCharCode' || name === 'fromCodePoint' || name === 'atob' || name === 'unescape' || name === 'decodeURIComponent' || name === 'decodeURI') return true;
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === 'loc') continue;
      if (Array.isArray(v)) {
        if (v.some((c) => c && typeof c === 'object' && typeof (c as N).type === 'string' && hasFragment(c as N))) return true;
      } else if (v && typeof v === 'object' && typeof (v as N).type === 'string' && hasFragment(v as N)) return true;
    }
    return false;
  }
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
  return imported.type === 'Identifier' ? (imported.name as string) : typeof imported.value === 'string' ? imported.value : undefined;
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

function collect(node: N, parent: N | undefined, key: string, parents: Map<N, { parent: N; key: string }>, out: N[]): void {
  out.push(node);
  if (parent) parents.set(node, { parent, key });
  for (const [k, v] of Object.entries(node)) {
    if (k === 'loc' || k === 'start' || k === 'end' || k === 'range') continue;
    if (Array.isArray(v)) {
      for (const c of v) if (c && typeof c === 'object' && typeof (c as N).type === 'string') collect(c as N, node, k, parents, out);
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
