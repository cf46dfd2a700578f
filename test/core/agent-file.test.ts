/**
 * The agent file, pure: every way a file is refused (with the field path, and the likely key for
 * a misspelt one), the canonical form that makes export → apply a no-op, the readable diff, and
 * the three-way comparison's drift and conflicts.
 */
import { describe, expect, it } from 'vitest';
import {
  agentLoopStartOf,
  checkAgentDocument,
  compareDocuments,
  formatDiff,
  likelyKey,
  maxAgentFileBytes,
  parseAgentFile,
  renderAgentFile,
  type AgentDocument,
} from '../../core/agent-file/index.js';

const errorsOf = (text: string, name?: string): string[] => {
  const r = parseAgentFile(text, name);
  if (r.ok) throw new Error('expected the file to be refused');
  return r.errors;
};
const docOf = (text: string, name?: string): AgentDocument => {
  const r = parseAgentFile(text, name);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.document;
};

describe('refusing bad files', () => {
  it('names the field path of wrong types', () => {
    expect(errorsOf('id: a\nname: 3\ngoals:\n  - title: x\n    priority: high\nlifeforce:\n  capacity: -1\n')).toEqual([
      'name: Invalid input: expected string, received number',
      'goals[0].priority: Invalid input: expected number, received string',
      'lifeforce.capacity: Too small: expected number to be >=0',
    ]);
    expect(errorsOf('name: no id\n')).toEqual(['id: required (string)']);
    expect(errorsOf('id: "has space"\n')[0]).toMatch(/^id: letters, digits/);
    expect(errorsOf('- a\n- b\n')).toEqual(['(document): an agent file is a mapping of keys (id, name, goals, …)']);
  });

  it('names unknown keys with the likely one', () => {
    expect(errorsOf('id: a\nsytemPrompt: {short: hi}\n')).toEqual([
      "sytemPrompt: unknown key (did you mean 'systemPrompt'?)",
    ]);
    expect(errorsOf('id: a\nsystem_prompt: {short: hi}\n')).toEqual([
      "system_prompt: unknown key (did you mean 'systemPrompt'?)",
    ]);
    expect(errorsOf('id: a\ngoals:\n  - title: x\n    priorty: 2\n')).toEqual([
      "goals[0].priorty: unknown key (did you mean 'priority'?)",
    ]);
    expect(errorsOf('id: a\nconfig:\n  novelty_treshold: 0.3\n')).toEqual([
      "config.novelty_treshold: unknown key (did you mean 'novelty_threshold'?)",
    ]);
    expect(errorsOf('id: a\nmodels:\n  validator: [x]\n')).toEqual([
      "models.validator: unknown key (did you mean 'validators'?)",
    ]);
    expect(errorsOf('id: a\nzzzzzz: 1\n')[0]).toMatch(/^zzzzzz: unknown key \(known here: id, name, /);
    expect(likelyKey('idle', ['id', 'name'])).toBeUndefined();
  });

  it('refuses config keys by the catalogue, and the two the file states elsewhere', () => {
    expect(errorsOf('id: a\nconfig:\n  max_tokens: 3\n  delay_ms: 5\n  idle_timeout_ms: 5000\n')).toEqual([
      'config.max_tokens: Too small: expected number to be >=16',
      'config.delay_ms: set it as pace.delayMs',
      'config.idle_timeout_ms: set it as idle.timeoutMs',
    ]);
  });

  it('refuses a literal API key wherever it is, without printing it', () => {
    const errors = errorsOf(
      'id: a\nmodels:\n  agent: {apiKey: "abc123"}\ndescription: "key sk-abcdefghijklmnopqrstuvwxyz0123"\npeers: [{id: b, endpoint: "https://u:pw@host"}]\n',
    );
    expect(errors.slice(3)).toEqual(['models.agent: a model name or a list of names (first = tried first)']);
    expect(errors[0]).toMatch(/^models\.agent\.apiKey: a literal secret; a file never holds a key/);
    expect(errors[1]).toMatch(/^description: looks like an OpenAI\/Anthropic-style key/);
    expect(errors[2]).toMatch(/^peers\[0\]\.endpoint: looks like a password in a URL/);
    expect(errors.join('\n')).not.toMatch(/abc123|sk-abcdef|pw@/);
    expect(errorsOf('{"id": "a", "token": "t0k3n"}', 'a.json')).toEqual([
      expect.stringMatching(/^token: a literal secret/),
    ]);
    // The file's other faults are named beside the secret.
    expect(errorsOf('id: a\nmodels: {agent: {apiKey: "x"}}\nname: 3\n')).toEqual([
      expect.stringMatching(/^models\.agent\.apiKey: a literal secret/),
      'name: Invalid input: expected string, received number',
      'models.agent: a model name or a list of names (first = tried first)',
    ]);
  });

  it('refuses a YAML alias bomb', () => {
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x]',
      'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]',
      'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]',
      'd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]',
      'id: x',
    ].join('\n');
    expect(errorsOf(bomb)).toEqual([expect.stringMatching(/^YAML: too many aliases/)]);
  });

  it('refuses a 10 MB file before parsing it', () => {
    const big = `id: x\ndescription: "${'a'.repeat(10 * 1024 * 1024)}"\n`;
    expect(errorsOf(big, 'big.yaml')).toEqual([
      `big.yaml is ${big.length} bytes: an agent file may be at most ${maxAgentFileBytes} bytes`,
    ]);
  });

  it('refuses an ethics rule that does not parse, naming it', () => {
    const errors = errorsOf(
      'id: a\nethics:\n  - title: no shell outside\n    rules:\n      - types: [shell]\n        when: {arg: command, equals: 1, in: [1]}\n      - types: [shell]\n        hostsOutside: ["not a host!"]\n      - types: [web.fetch]\n        when: {arg: url, matches: "("}\n',
    );
    expect(errors).toEqual([
      'ethics[0].rules[0].when[0]: give exactly one of equals, in, contains, matches',
      'ethics[0].rules[1].hostsOutside[0]: a host name, an IP or *.domain',
      'ethics[0].rules[2].when[0].matches: not a valid regular expression',
    ]);
  });

  it('refuses YAML that does not parse and duplicate keys or entries, with where', () => {
    expect(errorsOf('id: a\nid: b\n')[0]).toMatch(/^line 2, column 1: Map keys must be unique/);
    expect(errorsOf('id: a\n---\nid: b\n')).toEqual([
      'line 2, column 1: one agent per file (no second document after ---)',
    ]);
    expect(errorsOf('id: a\ngoals:\n  - title: x\n  - title: x\n')).toEqual([
      "goals[1]: goal 'x' appears twice (each must be unique)",
    ]);
    expect(errorsOf('{"id": "a",}', 'a.json')[0]).toMatch(/^JSON: /);
    expect(errorsOf('id: a\ntools:\n  mcp: [{command: x}]\n')[0]).toMatch(/^tools\.mcp\[0\]\.name: /);
  });
});

const full = `id: ada
name: Ada
description: a helper
identity:
  persona: calm
  values: [honesty]
  languages: [en]
systemPrompt:
  short: "  You help.  "
thinkingMethod:
  name: socratic
  prompt: Ask before you answer.
goals:
  - title: Learn Go
    priority: 2
  - title: Ship v1
    description: ""
tasks:
  - title: Read the tour
    goal: Learn Go
ethics:
  - title: No shell
    policy: Never run shell commands.
    forbids: [shell]
  - title: Local only
    rules: [{types: [shell], hostsOutside: [LocalHost]}]
models:
  agent: local
  validators: [{model: tiny, trust: 0.5}, {model: other}]
lifeforce: {capacity: 100, onExhausted: escalate}
pace: {delayMs: 100}
idle: {on: true, wakeOn: [note]}
config: {novelty_threshold: 0.3, emotions: [joy]}
peers: [bob, {id: cyd, relation: sibling}]
`;

describe('the canonical form', () => {
  it('fills defaults, trims text, drops empty text, lists one-model roles', () => {
    const d = docOf(full);
    expect(d.systemPrompt?.short).toBe('You help.');
    expect(d.goals?.[1]).toEqual({ title: 'Ship v1', priority: 0, status: 'active' });
    expect(d.models?.agent).toEqual(['local']);
    expect(d.models?.validators).toEqual([
      { model: 'tiny', trust: 0.5 },
      { model: 'other', trust: 1 },
    ]);
    expect(d.ethics?.[1]?.rules).toEqual([{ types: ['shell'], hostsOutside: ['localhost'] }]);
    expect(d.peers?.[0]).toEqual({ id: 'bob', relation: 'peer', status: 'active' });
  });

  it('render → parse gives the same document, in YAML and in JSON, and parses JSON the same as YAML', () => {
    const d = docOf(full);
    expect(docOf(renderAgentFile(d))).toEqual(d);
    expect(docOf(renderAgentFile(d, 'json'), 'x.json')).toEqual(d);
    expect(docOf(JSON.stringify(d))).toEqual(d);
    expect(checkAgentDocument(JSON.parse(JSON.stringify(d)))).toEqual({ ok: true, document: d });
    const again = docOf(renderAgentFile(docOf(renderAgentFile(d))));
    expect(renderAgentFile(again)).toBe(renderAgentFile(d));
  });

  it('the start input pieces of the agent loop', () => {
    expect(agentLoopStartOf(docOf(full))).toEqual({
      agentId: 'ada',
      name: 'Ada',
      settings: { delayMs: 100, idle: { on: true, wakeOn: ['note'] } },
      lifeforce: { capacity: 100, onExhausted: 'escalate' },
    });
    expect(agentLoopStartOf(docOf('id: x\nconfig: {max_tokens: 300, context_mode: meditation}\n'))).toEqual({
      agentId: 'x',
      settings: { maxTokens: 300, contextMode: 'meditation' },
    });
  });
});

describe('three ways', () => {
  const base = docOf(full);
  const edit = (f: (d: AgentDocument) => void) => {
    const d = structuredClone(base);
    f(d);
    return d;
  };

  it('file = live: nothing', () => {
    const c = compareDocuments({ base, live: base, file: base });
    expect(c).toEqual({ changes: [], drift: [], conflicts: [] });
    expect(formatDiff(c, 'ada')).toBe('agent ada: nothing to change');
  });

  it("file = base, live changed: drift, the agent's value kept", () => {
    const live = edit((d) => {
      d.goals![1]!.status = 'completed';
      d.config!.recent_responses = 9;
    });
    const c = compareDocuments({ base, live, file: base });
    expect(c.changes).toEqual([]);
    expect(c.conflicts).toEqual([]);
    expect(c.drift.map((d) => d.key)).toEqual(['goals["Ship v1"]', 'config["recent_responses"]']);
    expect(formatDiff(c, 'ada')).toBe(
      [
        'agent ada: nothing to change',
        "drift: the agent's own changes since the last apply, kept (put them in the file to keep them for good) (2):",
        '  ~ goals["Ship v1"]: status: "active" → "completed"',
        '  + config["recent_responses"]: 9',
      ].join('\n'),
    );
  });

  it('file changed, live = base: changes, in a readable diff', () => {
    const file = edit((d) => {
      d.name = 'Ada II';
      d.goals = d.goals!.filter((g) => g.title !== 'Ship v1');
      d.goals.push({ title: 'Rest', priority: 1, status: 'active' });
      d.peers![1]!.relation = 'peer';
    });
    const c = compareDocuments({ base, live: base, file });
    expect(formatDiff(c, 'ada')).toBe(
      [
        'agent ada: changes (4):',
        '  ~ name: "Ada" → "Ada II"',
        '  + goals["Rest"]: {"priority":1,"status":"active","title":"Rest"}',
        '  - goals["Ship v1"]',
        '  ~ peers["cyd"]: relation: "sibling" → "peer"',
      ].join('\n'),
    );
  });

  it('all three differ: a conflict', () => {
    const live = edit((d) => void (d.goals![0]!.status = 'completed'));
    const file = edit((d) => void (d.goals![0]!.priority = 7));
    const c = compareDocuments({ base, live, file });
    expect(c.conflicts.map((d) => d.key)).toEqual(['goals["Learn Go"]']);
    expect(formatDiff(c, 'ada')).toContain(
      '~ goals["Learn Go"]: priority: 2 → 7; status: "completed" → "active" (the agent changed status: "active" → "completed")',
    );
    expect(formatDiff(c, 'ada')).toContain('refused (pass --overwrite-drift to take the file)');
  });

  it('no base: the file wins for what it states; what only the agent has is its own', () => {
    const live = edit((d) => {
      d.name = 'Old name';
      d.goals!.push({ title: 'Own goal', priority: 0, status: 'active' });
    });
    const c = compareDocuments({ base: null, live, file: base });
    expect(c.changes.map((d) => d.key)).toEqual(['name']);
    expect(c.drift.map((d) => d.key)).toEqual(['goals["Own goal"]']);
    expect(c.conflicts).toEqual([]);
  });

  it('a field the file leaves out is not managed; an entry it drops is removed only if it had it', () => {
    const file = docOf('id: ada\ngoals:\n  - title: Learn Go\n    priority: 2\n');
    const c = compareDocuments({ base, live: base, file });
    // Ship v1 was in the base: dropped from the file, it goes. Nothing else (name, models…) is touched.
    expect(c.changes.map((d) => [d.key, d.file])).toEqual([['goals["Ship v1"]', undefined]]);
  });
});
