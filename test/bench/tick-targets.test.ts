/** The tick bench's targets: each figure read against its bound, a missing one said to be missing. */
import { describe, expect, it } from 'vitest';
import { tickTargets, tickTargetsNote, tickTargetsTable } from '../../bench/tick-targets.js';

describe('tick targets', () => {
  it('says met, missed or not measured for each, in the table and in the note', () => {
    const metrics: Record<string, number | null> = {
      agents_at_1hz_ratio_to_floor: 0.1,
      overhead_p50_ratio_to_activity_rt_pg: 1.2,
      ticks_per_s_50_agents_pg: 150.5,
      rss_mb_2000_idle_agents: 1110.4,
      ledger_overhead_p50_ms: null,
    };
    const note = tickTargetsNote(metrics);
    expect(note).toContain('agents_at_1hz_ratio_to_floor >= 0.8: 0.1, missed');
    expect(note).toContain('overhead_p50_ratio_to_activity_rt_pg <= 1.2: 1.2, met');
    expect(note).toContain('ticks_per_s_50_agents_pg >= 150: 150.5, met');
    expect(note).toContain('rss_mb_2000_idle_agents <= 1024: 1110.4, missed');
    expect(note).toContain('ledger_overhead_p50_ms <= 2: —, not measured');
    expect(note.split('; ')).toHaveLength(tickTargets.length);
    const table = tickTargetsTable(metrics).split('\n');
    expect(table).toHaveLength(tickTargets.length + 1);
    expect(table.find((l) => l.includes('ticks/s with 50 agents, Postgres'))).toMatch(/150\.50\s+>= 150\s+met$/);
    expect(table.find((l) => l.includes('worker RSS'))).toMatch(/MISSED$/);
  });
});
