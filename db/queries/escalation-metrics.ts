/**
 * The success metrics of escalations and state-machine tools, computed from the tables: catalogue growth,
 * escalation rate per task over time (it should fall), discovery rate, and the first-try
 * validation rate of designed tools. Read-only queries; `mindloop metrics <agent>` prints them.
 */
import { sql } from 'drizzle-orm';
import type { Db } from '../client.js';

interface EscalationMetrics {
  agentId: string;
  catalogue: {
    total: number;
    byKind: Record<string, number>;
    growth: Array<{ day: string; added: number; total: number }>;
  };
  escalations: {
    total: number;
    tasks: number;
    ratePerTask: number | null;
    overTime: Array<{ day: string; escalations: number; tasks: number; ratePerTask: number | null }>;
  };
  discovery: {
    discovered: number;
    byVia: Record<string, number>;
    perEscalation: number | null;
    overTime: Array<{ day: string; discovered: number }>;
  };
  designedTools: { total: number; firstTry: number; firstTryRate: number | null };
}

const ratio = (a: number, b: number): number | null => (b > 0 ? Math.round((a / b) * 1000) / 1000 : null);

async function rows<T>(db: Db, q: ReturnType<typeof sql>): Promise<T[]> {
  return (await db.execute(q)).rows as T[];
}

/** All four metrics for one agent (catalogue growth is global: the catalogue is shared). */
export async function escalationMetrics(db: Db, agentId: string): Promise<EscalationMetrics> {
  const growthRows = await rows<{ day: string; added: number }>(
    db,
    sql`select to_char(date_trunc('day', created_at), 'YYYY-MM-DD') as day, count(*)::int as added from tool_registry group by 1 order by 1`,
  );
  let total = 0;
  const growth = growthRows.map((r) => ({ day: r.day, added: r.added, total: (total += r.added) }));
  const byKind = Object.fromEntries(
    (
      await rows<{ kind: string; n: number }>(
        db,
        sql`select kind, count(*)::int as n from tool_registry group by kind order by kind`,
      )
    ).map((r) => [r.kind, r.n]),
  );

  const escByDay = await rows<{ day: string; n: number }>(
    db,
    sql`select to_char(date_trunc('day', created_at), 'YYYY-MM-DD') as day, count(*)::int as n from escalations where agent_id = ${agentId} group by 1`,
  );
  const tasksByDay = await rows<{ day: string; n: number }>(
    db,
    sql`select to_char(date_trunc('day', created_at), 'YYYY-MM-DD') as day, count(*)::int as n from tasks where agent_id = ${agentId} group by 1`,
  );
  const days = [...new Set([...escByDay.map((r) => r.day), ...tasksByDay.map((r) => r.day)])].sort();
  const at = (list: Array<{ day: string; n: number }>, d: string) => list.find((r) => r.day === d)?.n ?? 0;
  const overTime = days.map((d) => ({
    day: d,
    escalations: at(escByDay, d),
    tasks: at(tasksByDay, d),
    ratePerTask: ratio(at(escByDay, d), at(tasksByDay, d)),
  }));
  const escTotal = escByDay.reduce((s, r) => s + r.n, 0);
  const taskTotal = tasksByDay.reduce((s, r) => s + r.n, 0);

  const byVia = Object.fromEntries(
    (
      await rows<{ via: string; n: number }>(
        db,
        sql`select via, count(*)::int as n from discovered_tools where agent_id = ${agentId} group by via order by via`,
      )
    ).map((r) => [r.via, r.n]),
  );
  const discovered = Object.values(byVia).reduce((s, n) => s + n, 0);
  const discOverTime = await rows<{ day: string; discovered: number }>(
    db,
    sql`select to_char(date_trunc('day', discovered_at), 'YYYY-MM-DD') as day, count(*)::int as discovered from discovered_tools where agent_id = ${agentId} group by 1 order by 1`,
  );
  const viaEscalation = (byVia.escalation ?? 0) + (byVia.design ?? 0);

  // Designed tools that came from this agent's escalations; `spec.design.firstTry` is written at registration.
  const [designed] = await rows<{ total: number; first: number }>(
    db,
    sql`select count(*)::int as total, count(*) filter (where (t.spec->'design'->>'firstTry')::boolean)::int as first
        from tool_registry t join escalations e on e.id = t.spec->'design'->>'escalationId'
        where t.kind = 'designed' and e.agent_id = ${agentId}`,
  );
  return {
    agentId,
    catalogue: { total, byKind, growth },
    escalations: { total: escTotal, tasks: taskTotal, ratePerTask: ratio(escTotal, taskTotal), overTime },
    discovery: { discovered, byVia, perEscalation: ratio(viaEscalation, escTotal), overTime: discOverTime },
    designedTools: {
      total: designed?.total ?? 0,
      firstTry: designed?.first ?? 0,
      firstTryRate: ratio(designed?.first ?? 0, designed?.total ?? 0),
    },
  };
}

/** The metrics for a person. */
export function formatMetrics(m: EscalationMetrics): string {
  const pct = (r: number | null) => (r === null ? '-' : `${(r * 100).toFixed(1)}%`);
  const lines = [
    `metrics for ${m.agentId}`,
    `  catalogue        ${m.catalogue.total} tools (${
      Object.entries(m.catalogue.byKind)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    })`,
    ...m.catalogue.growth.map((g) => `    ${g.day}  +${g.added} → ${g.total}`),
    `  escalations      ${m.escalations.total} for ${m.escalations.tasks} tasks: ${m.escalations.ratePerTask ?? '-'} per task`,
    ...m.escalations.overTime.map((r) => `    ${r.day}  ${r.escalations} / ${r.tasks} tasks = ${r.ratePerTask ?? '-'}`),
    `  discovered tools ${m.discovery.discovered} (${
      Object.entries(m.discovery.byVia)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    }); ${m.discovery.perEscalation ?? '-'} per escalation`,
    `  designed tools   ${m.designedTools.total}, first-try validation ${pct(m.designedTools.firstTryRate)} (${m.designedTools.firstTry}/${m.designedTools.total})`,
  ];
  return lines.join('\n');
}
