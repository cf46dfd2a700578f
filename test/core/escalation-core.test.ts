/** Pure logic of escalations: state-machine tools, the conflict rules between tiers, danger zones. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkDanger, configureDangerRules, defaultDangerRules, type ProposedAction } from '../../core/danger-zones.js';
import { decide, humanVerdicts, oversightVerdicts, type DeadlinePhase } from '../../core/escalation-rules.js';
import { validateCommand } from '../../core/catalogue.js';
import {
  builtinStateMachines,
  databaseTool,
  describeTool,
  stateMachineSchema,
  transition,
  validActions,
} from '../../core/state-machines.js';

describe('state machines as tools', () => {
  it('the database tool goes IDLE → CONNECTED → QUERY_READY → IDLE', () => {
    expect(transition(databaseTool, 'IDLE', 'connect')).toEqual({
      ok: true,
      from: 'IDLE',
      to: 'CONNECTED',
      action: 'connect',
    });
    expect(transition(databaseTool, 'CONNECTED', 'query')).toMatchObject({ ok: true, to: 'QUERY_READY' });
    expect(transition(databaseTool, 'QUERY_READY', 'query')).toMatchObject({ ok: true, to: 'QUERY_READY' });
    expect(transition(databaseTool, 'QUERY_READY', 'disconnect')).toMatchObject({ ok: true, to: 'IDLE' });
  });

  it('an invalid action is an error that lists the actions valid in the current state', () => {
    const r = transition(databaseTool, 'IDLE', 'query');
    expect(r).toEqual({
      ok: false,
      from: 'IDLE',
      action: 'query',
      validActions: ['connect'],
      error: "database: action 'query' is not valid in state IDLE; valid actions: connect",
    });
    expect(transition(databaseTool, 'CONNECTED', 'connect')).toMatchObject({
      ok: false,
      validActions: ['list_tables', 'query', 'disconnect'],
    });
  });

  it('the description shows the current state and only its valid actions', () => {
    const d = describeTool(databaseTool, 'IDLE');
    expect(d).toContain('Current state: IDLE');
    expect(d).toContain('- connect() → CONNECTED');
    expect(d).not.toContain('query(');
    expect(describeTool(databaseTool, 'CONNECTED')).toContain('- query(table, columns, where, limit) → QUERY_READY');
  });

  it('ships the built-in tools', () => {
    expect(Object.keys(builtinStateMachines).sort()).toEqual([
      'database',
      'discover_tools',
      'escalate',
      'request_state_machine_design',
    ]);
  });

  it('a definition with an unknown target or initial state is refused, naming the path', () => {
    const bad = stateMachineSchema.safeParse({
      name: 'door',
      description: 'a door',
      initial: 'OPEN',
      states: { CLOSED: { description: 'closed', actions: { open: { to: 'AJAR', description: 'open it' } } } },
    });
    expect(bad.success).toBe(false);
    const msgs = bad.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(msgs).toContain("initial: initial state 'OPEN' is not among the states");
    expect(msgs).toContain("states.CLOSED.actions.open.to: unknown target state 'AJAR'");
  });

  it('property: any action sequence keeps the machine in a known state; refusals list exactly the valid actions', () => {
    const actions = ['connect', 'query', 'disconnect', 'list_tables', 'drop', 'fetch'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...actions), { maxLength: 30 }), (seq) => {
        let state = databaseTool.initial;
        for (const a of seq) {
          const r = transition(databaseTool, state, a);
          if (r.ok) {
            expect(validActions(databaseTool, state)).toContain(a);
            state = r.to;
          } else {
            expect(r.validActions).toEqual(validActions(databaseTool, state));
            expect(r.validActions).not.toContain(a);
          }
          expect(Object.keys(databaseTool.states)).toContain(state);
        }
      }),
    );
  });
});

describe('conflict rules', () => {
  const phases: DeadlinePhase[] = ['before_deadline', 'grace', 'expired'];

  it('human veto > oversight approval', () => {
    expect(
      decide({
        humanRequired: false,
        oversight: { verdict: 'approve' },
        human: { verdict: 'veto' },
        phase: 'before_deadline',
      }),
    ).toEqual({
      final: true,
      outcome: 'denied',
      decidedBy: 'human',
      why: 'human veto overrides the oversight approval',
    });
  });
  it('human approval > oversight (its approval or its rejection)', () => {
    expect(
      decide({ humanRequired: true, oversight: { verdict: 'reject' }, human: { verdict: 'approve' }, phase: 'grace' }),
    ).toMatchObject({ final: true, outcome: 'approved', decidedBy: 'human' });
    expect(
      decide({
        humanRequired: false,
        oversight: { verdict: 'approve' },
        human: { verdict: 'reject' },
        phase: 'before_deadline',
      }),
    ).toMatchObject({ final: true, outcome: 'denied', decidedBy: 'human' });
  });
  it('the oversight decides when no human input is required', () => {
    expect(
      decide({ humanRequired: false, oversight: { verdict: 'approve' }, human: null, phase: 'before_deadline' }),
    ).toMatchObject({ final: true, outcome: 'approved', decidedBy: 'oversight' });
    expect(
      decide({ humanRequired: false, oversight: { verdict: 'nudge' }, human: null, phase: 'before_deadline' }),
    ).toMatchObject({ final: true, outcome: 'nudged', decidedBy: 'oversight' });
    expect(decide({ humanRequired: false, oversight: null, human: null, phase: 'before_deadline' })).toMatchObject({
      final: false,
      waitingFor: 'oversight',
    });
  });
  it('human required and no answer: WAIT, then WAIT through the grace period, then deny', () => {
    const base = { humanRequired: true, oversight: { verdict: 'approve' as const }, human: null };
    expect(decide({ ...base, phase: 'before_deadline' })).toMatchObject({ final: false, status: 'awaiting_human' });
    expect(decide({ ...base, phase: 'grace' })).toMatchObject({ final: false, status: 'waiting' });
    expect(decide({ ...base, phase: 'expired' })).toMatchObject({
      final: true,
      outcome: 'denied',
      decidedBy: 'default',
    });
  });
  it('property: never approved unless someone approved; never approved by oversight when a human is required', () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.option(fc.constantFrom(...oversightVerdicts), { nil: null }),
        fc.option(fc.constantFrom(...humanVerdicts), { nil: null }),
        fc.constantFrom(...phases),
        (humanRequired, o, h, phase) => {
          const d = decide({
            humanRequired,
            oversight: o ? { verdict: o } : null,
            human: h ? { verdict: h } : null,
            phase,
          });
          if (d.final && d.outcome === 'approved') {
            expect(h === 'approve' || (!h && o === 'approve' && !humanRequired)).toBe(true);
            if (humanRequired) expect(d.decidedBy).toBe('human');
          }
          if (h === 'veto') expect(d).toMatchObject({ final: true, outcome: 'denied' });
          if (d.final && d.decidedBy === 'default') expect(d.outcome).toBe('denied');
        },
      ),
    );
  });
});

describe('danger zones', () => {
  const act = (name: string, args: Record<string, unknown>, kind: ProposedAction['kind'] = 'command'): string[] =>
    checkDanger({ kind, name, args, agentId: 'ada' }).map((f) => f.rule);

  it('flags SSH without auth', () => {
    expect(act('process.run', { command: ['ssh', '-o', 'StrictHostKeyChecking=no', 'root@10.0.0.1'] })).toEqual([
      'ssh_without_auth',
    ]);
    expect(act('process.run', { command: 'sshpass -p x ssh root@host' })).toEqual(['ssh_without_auth']);
    expect(act('process.run', { command: ['ssh', '-i', 'key', 'me@host'] })).toEqual([]);
  });
  it('flags deletes from critical tables, not from others', () => {
    expect(act('database.query', { sql: 'DELETE FROM agents WHERE id = 1' }, 'tool')).toEqual([
      'delete_critical_table',
    ]);
    expect(act('process.run', { command: 'psql -c "truncate table decision_log"' })).toEqual(['delete_critical_table']);
    expect(act('database.query', { sql: 'delete from scratch_notes' }, 'tool')).toEqual([]);
  });
  it('flags privileged and networked containers', () => {
    expect(act('sandbox.run', { privileged: true, network: 'none' })).toEqual(['privileged_container']);
    expect(act('sandbox.run', { network: 'bridge' })).toEqual(['networked_container']);
    expect(act('process.run', { command: 'docker run --privileged --network=host alpine' })).toEqual([
      'privileged_container',
      'networked_container',
    ]);
    expect(act('sandbox.run', { network: 'none' })).toEqual([]);
  });
  it("flags writes to another agent's rows", () => {
    expect(act('diary.add', { text: 'x', agentId: 'bob' })).toEqual(['foreign_rows_write']);
    expect(act('diary.add', { text: 'x', agentId: 'ada' })).toEqual([]);
    expect(act('diary.list', { agentId: 'bob' })).toEqual([]);
  });
  it('is configurable: rules can be disabled or added; a bad rule is refused', () => {
    const rules = configureDangerRules({
      disable: ['networked_container'],
      add: [
        {
          id: 'rm_rf',
          description: 'recursive delete of /',
          when: [{ type: 'text', pattern: String.raw`rm\s+-rf\s+/(\s|$)` }],
        },
      ],
    });
    expect(
      checkDanger(
        { kind: 'command', name: 'process.run', args: { network: 'bridge', command: 'rm -rf /' }, agentId: 'ada' },
        rules,
      ).map((f) => f.rule),
    ).toEqual(['rm_rf']);
    expect(() => configureDangerRules({ add: [{ id: 'Bad Id', description: '', when: [] }] })).toThrow(
      /id|description|when/,
    );
    expect(defaultDangerRules.map((r) => r.id)).toEqual([
      'ssh_without_auth',
      'delete_critical_table',
      'privileged_container',
      'networked_container',
      'foreign_rows_write',
    ]);
  });
});

describe('the escalate and tool.call commands (catalogue)', () => {
  it('a well-formed escalate validates; a bad category or a missing task is a clear rejection', () => {
    expect(
      validateCommand({
        cmdId: 'e1',
        type: 'escalate',
        args: { task: 'my mean is off', category: 'statistics', what_i_tried: 'recomputed' },
      }),
    ).toMatchObject({ ok: true });
    const bad = validateCommand({ cmdId: 'e2', type: 'escalate', args: { task: 'x', category: 'astrology' } });
    expect(bad).toMatchObject({ ok: false });
    expect(bad.ok ? '' : bad.reason).toMatch(/category/);
    const missing = validateCommand({ cmdId: 'e3', type: 'escalate', args: { category: 'code' } });
    expect(missing.ok ? '' : missing.reason).toMatch(/task/);
    const tool = validateCommand({ cmdId: 't1', type: 'tool.call', args: { tool: 'database' } });
    expect(tool.ok ? '' : tool.reason).toMatch(/action/);
  });
});
