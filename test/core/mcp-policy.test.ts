import { describe, expect, it } from 'vitest';
import { parseAgentFile, compareDocuments, renderAgentFile } from '../../core/agent-file/index.js';
import {
  argumentViolation,
  entryOfRow,
  grantedAtStart,
  heldForHuman,
  mcpServerEntrySchema,
  pathWithin,
  resolvePosix,
  rowOfEntry,
  sameConnection,
  serverPrices,
} from '../../core/mcp-policy.js';

const files = {
  name: 'files',
  command: ['node', 'server.js', '/srv/work'],
  allowPaths: ['/srv/work'],
  allowDestructive: ['create_directory'],
  price: { perCall: 3 },
};

describe('an MCP server entry of an agent file', () => {
  it('parses to a canonical entry and round-trips through its row', () => {
    const e = mcpServerEntrySchema.parse({ ...files, env: [], sandbox: true });
    expect(e).toEqual({
      name: 'files',
      command: ['node', 'server.js', '/srv/work'],
      enabled: true,
      sandbox: { network: false },
      allowPaths: ['/srv/work'],
      allowDestructive: ['create_directory'],
      price: { perCall: 3 },
    });
    const row = rowOfEntry(e);
    expect(row).toMatchObject({ transport: 'stdio', command: 'node', args: ['server.js', '/srv/work'], envNames: [] });
    expect(row.policy).toEqual({ allowPaths: ['/srv/work'], allowDestructive: ['create_directory'], pricePerCall: 3 });
    expect(entryOfRow(row)).toEqual(e);
    const http = mcpServerEntrySchema.parse({
      name: 'search',
      url: 'https://mcp.example.org/mcp',
      headers: { A: 'TOK' },
    });
    expect(entryOfRow(rowOfEntry(http))).toEqual(http);
  });

  it('refuses what cannot be run or would hold a secret, each with a reason', () => {
    const bad = (v: unknown) => {
      const r = mcpServerEntrySchema.safeParse(v);
      expect(r.success).toBe(false);
      return r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    };
    expect(bad({ name: 'x' })).toMatch(/either command \(stdio\) or url/);
    expect(bad({ name: 'x', command: ['a'], url: 'https://a.org' })).toMatch(/either command/);
    expect(bad({ name: 'x', command: 'a', env: ['sk-abc123'] })).toMatch(/NAME of an environment variable/);
    expect(bad({ name: 'x', command: 'a', headers: { Authorization: 'TOKEN' } })).toMatch(/headers are for an http/);
    expect(bad({ name: 'x', url: 'https://a.org', sandbox: true })).toMatch(/only a stdio server/);
    expect(bad({ name: 'X Y', command: 'a' })).toMatch(/a server name/);
    expect(bad({ name: 'x', command: 'a', grant: 'some' })).toMatch(/grant/);
    expect(bad({ name: 'x', command: 'a', nmae: 1 })).toMatch(/nmae|Unrecognized/i);
  });

  it('is one item per server in the three-way comparison, and an export applies as a no-op', () => {
    const file = (extra: string) => {
      const r = parseAgentFile(
        `id: ada\ntools:\n  mcp:\n    - name: files\n      command: [node, server.js]\n${extra}`,
      );
      if (!r.ok) throw new Error(r.errors.join('\n'));
      return r.document;
    };
    const a = file('');
    const b = file('      allowPaths: [/srv]\n');
    const c = compareDocuments({ base: a, live: a, file: b });
    expect(c.changes.map((d) => d.key)).toEqual(['tools.mcp["files"]']);
    const rendered = renderAgentFile(b);
    expect(rendered).not.toContain('enabled');
    const back = parseAgentFile(rendered);
    expect(back.ok && compareDocuments({ base: b, live: b, file: back.document }).changes).toEqual([]);
    // Two servers of one name are refused.
    const dup = parseAgentFile(
      'id: ada\ntools:\n  mcp:\n    - {name: files, command: a}\n    - {name: files, command: b}\n',
    );
    expect(dup.ok).toBe(false);
  });

  it('starts a server again only when how it is reached changes', () => {
    const a = rowOfEntry(mcpServerEntrySchema.parse(files));
    expect(sameConnection(a, rowOfEntry(mcpServerEntrySchema.parse({ ...files, allowPaths: ['/tmp'] })))).toBe(true);
    expect(sameConnection(a, rowOfEntry(mcpServerEntrySchema.parse({ ...files, env: ['HOME'] })))).toBe(false);
    expect(sameConnection(a, rowOfEntry(mcpServerEntrySchema.parse({ ...files, sandbox: true })))).toBe(false);
  });
});

describe('the rules an entry adds', () => {
  it('holds a destructive tool for a human unless the entry allows it', () => {
    const destructive = {};
    expect(heldForHuman('write_file', destructive, {})).toBe(true);
    expect(heldForHuman('write_file', { readOnlyHint: true }, {})).toBe(false);
    expect(heldForHuman('write_file', { destructiveHint: false }, {})).toBe(false);
    expect(heldForHuman('write_file', destructive, { allowDestructive: ['create_directory'] })).toBe(true);
    expect(heldForHuman('create_directory', destructive, { allowDestructive: ['create_directory'] })).toBe(false);
    expect(heldForHuman('write_file', destructive, { allowDestructive: true })).toBe(false);
  });

  it('keeps path arguments under allowPaths, against .. and file:// URLs', () => {
    const p = { allowPaths: ['/srv/work', 'data'] };
    expect(argumentViolation(p, { path: '/srv/work/a.txt' }, '/app')).toBeNull();
    expect(argumentViolation(p, { path: 'data/x' }, '/app')).toBeNull();
    expect(argumentViolation(p, { paths: ['/srv/work/a', '/app/data/b'] }, '/app')).toBeNull();
    expect(argumentViolation(p, { path: '/etc/passwd' }, '/app')).toMatch(/argument path: "\/etc\/passwd" is outside/);
    expect(argumentViolation(p, { source: '/srv/work/../../etc/shadow' }, '/app')).toMatch(/argument source/);
    expect(argumentViolation(p, { path: '/srv/workbench/x' }, '/app')).toMatch(/outside/);
    expect(argumentViolation(p, { edits: [{ file_path: '/root/.ssh/id_rsa' }] }, '/app')).toMatch(/file_path/);
    expect(argumentViolation(p, { uri: 'file:///etc/hosts' }, '/app')).toMatch(/outside/);
    // A name that is not a path's is not read as one; no list, no rule.
    expect(argumentViolation(p, { content: '/etc/passwd' }, '/app')).toBeNull();
    expect(argumentViolation({}, { path: '/etc/passwd' }, '/app')).toBeNull();
    expect(pathWithin('/srv/work', '/srv/work/', '/')).toBe(true);
  });

  it('keeps URL arguments under allowUrls, whatever their name', () => {
    const p = { allowUrls: ['https://api.example.org/'] };
    expect(argumentViolation(p, { url: 'https://api.example.org/v1/x' }, '/')).toBeNull();
    expect(argumentViolation(p, { q: 'plain words' }, '/')).toBeNull();
    expect(argumentViolation(p, { target: { link: 'https://api.example.org.evil.com/' } }, '/')).toMatch(
      /argument link: .* is not under the allowed URLs/,
    );
    expect(argumentViolation(p, { u: 'http://169.254.169.254/latest' }, '/')).toMatch(/not under/);
  });

  it("prices a server's calls by its entry, else the deployment's; grants all tools unless it names some", () => {
    const prices = { lfPerMcpCall: 1, lfPerMcpSecond: 0, other: 7 };
    expect(serverPrices(prices, {})).toEqual(prices);
    expect(serverPrices(prices, { pricePerCall: 3, pricePerSecond: 0.5 })).toEqual({
      lfPerMcpCall: 3,
      lfPerMcpSecond: 0.5,
      other: 7,
    });
    expect(grantedAtStart({}, 'a')).toBe(true);
    expect(grantedAtStart({ grant: 'all' }, 'a')).toBe(true);
    expect(grantedAtStart({ grant: ['b'] }, 'a')).toBe(false);
    expect(grantedAtStart({ grant: ['a'] }, 'a')).toBe(true);
  });
});

describe('resolvePosix', () => {
  it('resolves . and .. against a base, never above the root', () => {
    expect(resolvePosix('/app', 'data/./x')).toBe('/app/data/x');
    expect(resolvePosix('/app', '../../../etc')).toBe('/etc');
    expect(resolvePosix('/app', '/srv//work/')).toBe('/srv/work');
  });
});
