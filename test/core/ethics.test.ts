/**
 * Ethics policies that forbid by meaning (core/ethics.ts), the validators' question that
 * carries them, and the gate's safe default for destructive commands with no validator.
 */
import { describe, expect, it } from 'vitest';
import { catalogue, commandTypes, helpText, isDestructive, validateCommand } from '../../core/catalogue.js';
import {
  ethicsViolation,
  hostRuleApplies,
  networkHosts,
  parsePolicyRules,
  policyRuleSchema,
  ruleViolation,
  targetOf,
  targetsNeeded,
  unresolvedHost,
  type EthicsPolicy,
  type PolicyRule,
} from '../../core/ethics.js';
import { gateCommands, heldForHuman, universalQuestion, validatorQuestion } from '../../core/validation.js';

const rule = (r: unknown): PolicyRule => policyRuleSchema.parse(r);
const userNotes: EthicsPolicy = {
  id: 4,
  title: 'Keep what the user gave',
  rule: 'Never delete user-provided diary entries.',
  severity: 'block',
  forbids: [],
  rules: [rule({ types: ['diary.delete'], when: { target: 'source', equals: 'user' } })],
};
const localOnly: EthicsPolicy = {
  id: 5,
  title: 'No outside network',
  rule: 'No network access to hosts outside the allow-list.',
  severity: 'block',
  forbids: [],
  rules: [rule({ types: ['shell', 'tool.call'], hostsOutside: ['localhost', '127.0.0.1', '*.internal.example'] })],
};
const min = (t: string) => (t === 'shell' || t.endsWith('.delete') || t === 'config.set' ? 2 : 1);

describe('the rule language', () => {
  it('parses the documented shapes and names the field of a bad rule', () => {
    expect(
      parsePolicyRules([
        { types: ['diary.delete'], when: { target: 'source', equals: 'user' } },
        { types: ['shell'], hostsOutside: ['localhost'] },
      ]),
    ).toMatchObject({ ok: true });
    expect(
      parsePolicyRules([
        {
          types: ['config.set'],
          when: [
            { arg: 'key', in: ['delay_ms'] },
            { arg: 'value', equals: 0 },
          ],
        },
      ]),
    ).toMatchObject({ ok: true });
    const bad = (r: unknown) => {
      const p = parsePolicyRules([r]);
      expect(p.ok).toBe(false);
      return p.ok ? '' : p.error;
    };
    expect(bad({ types: ['x'], when: { arg: 'a', target: 'source', equals: 1 } })).toMatch(
      /rules\.0\.when\.0: give exactly one of arg, target/,
    );
    expect(bad({ types: ['x'], when: { arg: 'a', equals: 1, in: [1] } })).toMatch(
      /exactly one of equals, in, contains, matches/,
    );
    expect(bad({ types: ['x'], when: { arg: 'a', matches: '(' } })).toMatch(/not a valid regular expression/);
    expect(bad({ types: ['x'] })).toMatch(/give when or hostsOutside/);
    expect(bad({ types: [], hostsOutside: [] })).toMatch(/rules\.0\.types/);
    expect(bad({ types: ['x'], when: { target: 'owner', equals: 'me' } })).toMatch(/rules\.0\.when\.0\.target/);
  });

  it("a rule over a looked-up fact: deleting a user-provided entry breaks it, the agent's own does not", () => {
    const del = { type: 'diary.delete', args: { id: 7 } };
    expect(ruleViolation(userNotes.rules![0]!, del, { target: { exists: true, source: 'user' } })).toBe(
      'target.source = "user"',
    );
    expect(ruleViolation(userNotes.rules![0]!, del, { target: { exists: true, source: 'agent' } })).toBeNull();
    expect(ruleViolation(userNotes.rules![0]!, del, { target: null })).toBeNull(); // no such row: nothing to protect
    expect(
      ruleViolation(userNotes.rules![0]!, { type: 'diary.pin', args: { id: 7 } }, { target: { source: 'user' } }),
    ).toBeNull(); // another type
  });

  it('conditions over args: equals, in, contains, matches, not, dot paths', () => {
    const v = (when: unknown, args: Record<string, unknown>) =>
      ruleViolation(rule({ types: ['*'], when }), { type: 'config.set', args });
    expect(v({ arg: 'key', in: ['delay_ms', 'max_tokens'] }, { key: 'delay_ms', value: 0 })).toBe(
      'args.key in ["delay_ms","max_tokens"]',
    );
    expect(v({ arg: 'key', in: ['delay_ms'] }, { key: 'emotions' })).toBeNull();
    expect(v({ arg: 'value', equals: 0 }, { value: 0 })).not.toBeNull();
    expect(v({ arg: 'value', equals: 0 }, { value: '0' })).toBeNull(); // types are compared, not coerced
    expect(v({ arg: 'a.b', contains: 'SECRET' }, { a: { b: 'the secret plan' } })).not.toBeNull();
    expect(v({ arg: 'tags', contains: 'private' }, { tags: ['x', 'Private'] })).not.toBeNull();
    expect(v({ arg: 'title', matches: '^rm\\b' }, { title: 'rm -rf' })).not.toBeNull();
    expect(v({ arg: 'title', matches: '^rm\\b', not: true }, { title: 'rm -rf' })).toBeNull();
    expect(v({ arg: 'missing', equals: 'x' }, {})).toBeNull();
  });

  it('hosts a command reaches: URLs in any arg, network tools in shell, computed hosts unresolved', () => {
    expect(networkHosts('shell', { command: 'curl -s https://api.example.com/v1 | jq .' })).toEqual([
      'api.example.com',
    ]);
    expect(networkHosts('shell', { command: 'ping -c 1 127.0.0.1 && ssh root@10.0.0.9 uptime' })).toEqual([
      '127.0.0.1',
      '10.0.0.9',
    ]);
    expect(networkHosts('shell', { command: 'wget "$TARGET"' })).toEqual([unresolvedHost]);
    expect(networkHosts('shell', { command: 'echo $(curl evil.example.org)' })).toEqual(['evil.example.org']);
    expect(networkHosts('shell', { command: 'curl `cat host.txt`' })).toEqual([unresolvedHost]);
    expect(networkHosts('shell', { command: 'echo example.com; ls /work' })).toEqual([]); // no network tool, no URL
    expect(
      networkHosts('tool.call', { tool: 'http', action: 'get', args: { url: 'http://LOCALHOST:8080/x' } }),
    ).toEqual(['localhost']);
    const shell = (command: string) => ruleViolation(localOnly.rules![0]!, { type: 'shell', args: { command } });
    expect(shell('curl http://localhost:3000/health')).toBeNull();
    expect(shell('curl https://db.internal.example/q')).toBeNull(); // *.domain
    expect(shell('curl https://internal.example.evil.com/q')).toMatch(/reaches internal\.example\.evil\.com/);
    expect(shell('curl https://example.com')).toBe(
      'reaches example.com (not in localhost, 127.0.0.1, *.internal.example)',
    );
    expect(shell('nc $HOST 80')).toMatch(/reaches \(unresolved\)/);
    expect(shell('ls -la')).toBeNull();
  });

  it('an MCP tool answers to mcp.<server>.<tool>; an open-world one that names no host breaks a host rule', () => {
    const call = (tool: string, args: Record<string, unknown> = {}) => ({
      type: 'tools.mcp',
      args: { server: 'web', tool, args },
    });
    const noWrites: EthicsPolicy = { id: 7, title: 'no writes', severity: 'block', forbids: ['mcp.files.*'] };
    expect(
      ethicsViolation({ type: 'tools.mcp', args: { server: 'files', tool: 'write_file' } }, [noWrites]),
    ).toMatchObject({ why: 'forbids mcp.files.*' });
    expect(ethicsViolation(call('search'), [noWrites])).toBeNull();
    const hosts = rule({ types: ['mcp.web.*'], hostsOutside: ['docs.example.org'] });
    expect(ruleViolation(hosts, call('fetch', { url: 'https://docs.example.org/a' }), { openWorld: true })).toBeNull();
    expect(ruleViolation(hosts, call('fetch', { url: 'https://evil.example.net/' }), { openWorld: true })).toMatch(
      /reaches evil\.example\.net/,
    );
    expect(ruleViolation(hosts, call('search', { q: 'tides' }), { openWorld: true })).toMatch(
      /open-world tool that names no host/,
    );
    // A closed-world tool naming no host reaches none.
    expect(ruleViolation(hosts, call('search', { q: 'tides' }), { openWorld: false })).toBeNull();
    expect(hostRuleApplies([{ id: 8, title: 'h', severity: 'block', forbids: [], rules: [hosts] }], call('x'))).toBe(
      true,
    );
    expect(hostRuleApplies([{ id: 8, title: 'h', severity: 'warn', forbids: [], rules: [hosts] }], call('x'))).toBe(
      false,
    );
  });

  it('the first blocking policy wins; forbids patterns, warn/info never block, unparsable rules fail closed', () => {
    const warn: EthicsPolicy = { id: 1, title: 'be gentle', severity: 'warn', forbids: ['*'] };
    const noShell: EthicsPolicy = { id: 2, title: 'no shell', severity: 'block', forbids: ['shell'] };
    const broken: EthicsPolicy = {
      id: 3,
      title: 'typo',
      severity: 'block',
      forbids: [],
      rules: [],
      invalid: 'rules.0.types: required',
    };
    expect(ethicsViolation({ type: 'diary.add', args: {} }, [warn])).toBeNull();
    expect(ethicsViolation({ type: 'shell', args: { command: 'ls' } }, [warn, noShell, localOnly])).toMatchObject({
      policy: { id: 2 },
      why: 'forbids shell',
    });
    expect(ethicsViolation({ type: 'diary.add', args: {} }, [broken])).toMatchObject({
      policy: { id: 3 },
      why: expect.stringContaining('do not parse'),
    });
  });

  it('the activity looks up facts only for commands some blocking rule reads them for', () => {
    expect(targetOf('diary.delete', { id: '12' })).toEqual({ table: 'diary_entries', id: 12 });
    expect(targetOf('notes.send', { id: 3 })).toBeNull();
    expect(targetOf('diary.delete', { id: 'x' })).toBeNull();
    const cmds = [
      { cmdId: 'a', type: 'diary.delete', args: { id: 1 } },
      { cmdId: 'b', type: 'concepts.delete', args: { id: 2 } },
      { cmdId: 'c', type: 'shell', args: { command: 'ls' } },
    ];
    expect(targetsNeeded(cmds, [userNotes, localOnly])).toEqual([{ cmdId: 'a', table: 'diary_entries', id: 1 }]);
    expect(targetsNeeded(cmds, [{ ...userNotes, severity: 'warn' }])).toEqual([]);
  });
});

describe('the gate', () => {
  it("a policy rule blocks at +3, naming the policy; the same command on the agent's own entry runs", () => {
    const cmds = [
      { cmdId: 'a', type: 'diary.delete', args: { id: 1 } },
      { cmdId: 'b', type: 'diary.delete', args: { id: 2 } },
    ];
    const facts = { a: { target: { exists: true, source: 'user' } }, b: { target: { exists: true, source: 'agent' } } };
    const g = gateCommands(cmds, { mode: 'normal', rating: 3, blocked: false }, min, [userNotes], {
      facts,
      destructive: isDestructive,
    });
    expect(g.allowed).toEqual(['b']);
    expect(g.held.a).toBe('forbidden by ethics policy #4 "Keep what the user gave": target.source = "user"');
    // No validator at all: the policy still blocks (before the destructive default is even asked).
    const alone = gateCommands(cmds, { mode: 'auto_pass', rating: null, blocked: false }, min, [userNotes], {
      facts,
      destructive: isDestructive,
      autoPassDestructive: true,
    });
    expect(alone).toEqual({ allowed: ['b'], held: { a: expect.stringContaining('ethics policy #4') } });
  });

  it('with no validator, destructive commands wait for a human unless the agent opted in', () => {
    const cmds = [
      { cmdId: 'add', type: 'diary.add', args: { title: 't', content: 'c' } },
      { cmdId: 'del', type: 'diary.delete', args: { id: 1 } },
      { cmdId: 'sh', type: 'shell', args: { command: 'ls' } },
      { cmdId: 'cfg', type: 'config.set', args: { key: 'delay_ms', value: 0 } },
      { cmdId: 'odd', type: 'made.up', args: {} },
    ];
    const held = gateCommands(cmds, { mode: 'auto_pass', rating: null, blocked: false }, min, [], {
      destructive: isDestructive,
    });
    expect(held.allowed).toEqual(['add', 'odd']); // an unknown type never runs: the catalogue rejects it
    expect(held.held).toEqual({ del: heldForHuman, sh: heldForHuman, cfg: heldForHuman });
    const optedIn = gateCommands(cmds, { mode: 'auto_pass', rating: null, blocked: false }, min, [], {
      destructive: isDestructive,
      autoPassDestructive: true,
    });
    expect(optedIn.allowed).toEqual(['add', 'del', 'sh', 'cfg', 'odd']);
    // With validators the thresholds decide, not the default.
    expect(
      gateCommands(cmds, { mode: 'normal', rating: 2, blocked: false }, min, [], { destructive: isDestructive })
        .allowed,
    ).toEqual(['add', 'del', 'sh', 'cfg', 'odd']);
  });

  it("the validators' question carries the policies' text", () => {
    const q = validatorQuestion('I will tidy up.', [userNotes, { ...localOnly, rationale: 'data stays here' }]);
    expect(q.startsWith(universalQuestion)).toBe(true);
    expect(q).toContain('#4 "Keep what the user gave" (block): Never delete user-provided diary entries.');
    expect(q).toContain(
      '#5 "No outside network" (block): No network access to hosts outside the allow-list. — why: data stays here',
    );
    expect(q).toMatch(/Reply to validate:\n"""\nI will tidy up\.\n"""$/);
    expect(validatorQuestion('x', [])).not.toContain('ethics policies');
  });
});

describe('the catalogue marks destructive commands', () => {
  it('every delete, shell and config.set; reads and unknown types are not', () => {
    for (const t of commandTypes) if (catalogue[t].action === 'delete') expect(catalogue[t].destructive, t).toBe(true);
    expect(['shell', 'config.set'].every(isDestructive)).toBe(true);
    expect(isDestructive('no.such')).toBe(false);
    expect(['diary.add', 'diary.list', 'notes.send', 'tool.call'].some(isDestructive)).toBe(false);
    expect(helpText('diary')).toMatch(/diary\.delete .*destructive: held for a human when no validator is configured/);
  });

  it('auto_pass_destructive is advertised in the config help and only a human sets it', () => {
    expect(helpText('config')).toMatch(
      /auto_pass_destructive \(default false\): with no validator, run destructive commands/,
    );
    const v = validateCommand({ cmdId: 'x', type: 'config.set', args: { key: 'auto_pass_destructive', value: true } });
    expect(v).toMatchObject({
      ok: false,
      reason: expect.stringContaining('auto_pass_destructive is set by a human only'),
    });
    expect(validateCommand({ cmdId: 'y', type: 'config.set', args: { key: 'delay_ms', value: 5 } }).ok).toBe(true);
  });
});
