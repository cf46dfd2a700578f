/** The commands over what the agent knows: help, diary, concepts and links, goals and tasks, facts, notes, notebook. */
import { z } from 'zod';
import {
  id,
  ids,
  text,
  tagList,
  limit,
  offset,
  priority,
  emotionReading,
  conceptRef,
  goalStatusValues,
  goalRelationValues,
  taskStatusValues,
  factStatusValues,
  noteSourceValues,
  atLeastOne,
  atLeastOneMessage,
  def,
  listArgs,
} from './args.js';

/** What `memory.restore` brings back: a diary entry, a notebook entry, a reply, a concept, a link, an abstract. */
export const restoreKinds = ['diary', 'note', 'reply', 'concept', 'link', 'abstract'] as const;

/** What `memory.search` looks through: diary, notebook entries, replies, concepts, abstracts. */
export const searchKinds = ['diary', 'note', 'reply', 'concept', 'abstract'] as const;

export const memoryCommands = {
  help: def({
    args: z.strictObject({ family: z.string().trim().optional() }),
    help: 'list the commands, or one family in detail',
    writes: false,
  }),

  'diary.list': def({ args: listArgs, help: 'recent diary entries, pinned first', writes: false }),
  'diary.search': def({
    args: z.strictObject({ query: text(200), tags: tagList.optional(), limit, archived: z.boolean().optional() }),
    help: 'diary entries by words and by meaning (other words for the same thing); archived: true also finds forgotten ones',
    writes: false,
    usage: '{query, tags?, limit?, archived?: true to include archived entries}',
  }),
  'diary.read': def({ args: z.strictObject({ id }), help: 'one diary entry in full', writes: false }),
  'diary.add': def({
    args: z.strictObject({
      title: text(200),
      content: text(20_000),
      tags: tagList.optional(),
      priority: priority.optional(),
      pinned: z.boolean().optional(),
      emotions: z.array(emotionReading).max(10).optional(),
    }),
    help: 'write a long-term diary entry',
    writes: true,
  }),
  'diary.update': def({
    args: z
      .strictObject({
        id,
        title: text(200).optional(),
        content: text(20_000).optional(),
        tags: tagList.optional(),
        priority: priority.optional(),
      })
      .refine(
        atLeastOne(['title', 'content', 'tags', 'priority']),
        atLeastOneMessage(['title', 'content', 'tags', 'priority']),
      ),
    help: 'change a diary entry',
    writes: true,
  }),
  'diary.delete': def({
    args: z.strictObject({ id }),
    help: 'archive a diary entry (restorable)',
    writes: true,
    destructive: true,
  }),
  'diary.pin': def({ args: z.strictObject({ id }), help: 'pin a diary entry', writes: true }),
  'diary.unpin': def({ args: z.strictObject({ id }), help: 'unpin a diary entry', writes: true }),

  'concepts.add': def({
    args: z.strictObject({
      name: text(200),
      description: z.string().max(5000).optional(),
      tags: tagList.optional(),
      weight: z.number().min(0).max(100).optional(),
    }),
    help: 'add a node to your semantic graph (names are unique)',
    writes: true,
  }),
  'concepts.list': def({
    args: z.strictObject({ limit, offset, tag: text(64).optional(), query: text(200).optional() }),
    help: 'concepts, heaviest first',
    writes: false,
  }),
  'concepts.read': def({
    args: z.strictObject({ concept: conceptRef }),
    help: 'one concept and its links',
    writes: false,
    usage: '{concept: id or name}',
  }),
  'concepts.update': def({
    args: z
      .strictObject({
        id,
        name: text(200).optional(),
        description: z.string().max(5000).optional(),
        tags: tagList.optional(),
        weight: z.number().min(0).max(100).optional(),
      })
      .refine(
        atLeastOne(['name', 'description', 'tags', 'weight']),
        atLeastOneMessage(['name', 'description', 'tags', 'weight']),
      ),
    help: 'change a concept',
    writes: true,
  }),
  'concepts.delete': def({
    args: z.strictObject({ id }),
    help: 'archive a concept (restorable)',
    writes: true,
    destructive: true,
  }),

  'links.add': def({
    args: z.strictObject({
      from: conceptRef,
      to: conceptRef,
      relation: text(64).optional(),
      weight: z.number().min(0).max(100).optional(),
    }),
    help: 'link two concepts (by id or name); relation defaults to related_to',
    writes: true,
    usage: '{from: concept id or name, to: concept id or name, relation?, weight?}',
  }),
  'links.list': def({
    args: z.strictObject({ concept: conceptRef.optional(), relation: text(64).optional(), limit }),
    help: 'links, optionally of one concept',
    writes: false,
    usage: '{concept?: id or name, relation?, limit?}',
  }),
  'links.delete': def({
    args: z.strictObject({ id }),
    help: 'archive a link (restorable)',
    writes: true,
    destructive: true,
  }),

  'goals.add': def({
    args: z.strictObject({
      title: text(300),
      description: z.string().max(5000).optional(),
      constraints: z.string().max(2000).optional(),
      success_criteria: z.string().max(2000).optional(),
      priority: priority.optional(),
      tags: tagList.optional(),
      parent_id: id.optional(),
    }),
    help: 'add a goal (parent_id makes it a subgoal)',
    writes: true,
  }),
  'goals.list': def({
    args: z.strictObject({ status: z.enum([...goalStatusValues, 'all']).optional(), limit }),
    help: 'goals by priority (default: active)',
    writes: false,
  }),
  'goals.read': def({ args: z.strictObject({ id }), help: 'one goal with its links and tasks', writes: false }),
  'goals.update': def({
    args: z
      .strictObject({
        id,
        title: text(300).optional(),
        description: z.string().max(5000).optional(),
        constraints: z.string().max(2000).optional(),
        success_criteria: z.string().max(2000).optional(),
        priority: priority.optional(),
        tags: tagList.optional(),
      })
      .refine(
        atLeastOne(['title', 'description', 'constraints', 'success_criteria', 'priority', 'tags']),
        atLeastOneMessage(['title', 'description', 'constraints', 'success_criteria', 'priority', 'tags']),
      ),
    help: 'change a goal',
    writes: true,
  }),
  'goals.status': def({
    args: z
      .strictObject({
        id,
        status: z.enum(goalStatusValues),
        failure_reason: z.string().trim().min(1).max(1000).optional(),
      })
      .refine((v) => v.status !== 'failed' || v.failure_reason !== undefined, {
        message: 'failure_reason is required when status is failed',
        path: ['failure_reason'],
      }),
    help: 'set a goal active|paused|completed|failed (failed needs failure_reason)',
    writes: true,
  }),
  'goals.link': def({
    args: z.strictObject({ parent_id: id, child_id: id, relation: z.enum(goalRelationValues).optional() }),
    help: 'link two goals (relation defaults to subgoal)',
    writes: true,
  }),
  'goals.unlink': def({
    args: z.strictObject({ parent_id: id, child_id: id, relation: z.enum(goalRelationValues).optional() }),
    help: 'remove a goal link (all relations unless one is named)',
    writes: true,
  }),

  'tasks.add': def({
    args: z.strictObject({
      title: text(300),
      description: z.string().max(5000).optional(),
      goal_id: id.optional(),
      priority: priority.optional(),
      pinned: z.boolean().optional(),
      tags: tagList.optional(),
    }),
    help: 'add a task',
    writes: true,
  }),
  'tasks.list': def({
    args: z.strictObject({ status: z.enum([...taskStatusValues, 'all']).optional(), goal_id: id.optional(), limit }),
    help: 'tasks, pinned first then by priority (default: not finished)',
    writes: false,
  }),
  'tasks.read': def({ args: z.strictObject({ id }), help: 'one task in full', writes: false }),
  'tasks.update': def({
    args: z
      .strictObject({
        id,
        title: text(300).optional(),
        description: z.string().max(5000).optional(),
        goal_id: id.nullable().optional(),
        tags: tagList.optional(),
      })
      .refine(
        atLeastOne(['title', 'description', 'goal_id', 'tags']),
        atLeastOneMessage(['title', 'description', 'goal_id', 'tags']),
      ),
    help: 'change a task (an auxiliary loop: only its own)',
    writes: true,
    allowedInTaskLoop: true,
  }),
  'tasks.pin': def({ args: z.strictObject({ id }), help: 'pin a task (shown in every context)', writes: true }),
  'tasks.unpin': def({ args: z.strictObject({ id }), help: 'unpin a task', writes: true }),
  'tasks.priority': def({
    args: z.strictObject({ id, priority }),
    help: 'set a task priority (-100..100)',
    writes: true,
  }),
  'tasks.status': def({
    args: z.strictObject({ id, status: z.enum(taskStatusValues) }),
    help: 'set a task open|in_progress|blocked|done|failed|cancelled (an auxiliary loop: only its own)',
    writes: true,
    allowedInTaskLoop: true,
  }),

  // Fact-checks: facts the agent stated with confidence < 0.7 wait as
  // `unverified_facts` rows, each with a fact-check task; the agent records the outcome.
  'facts.list': def({
    args: z.strictObject({ status: z.enum([...factStatusValues, 'all']).optional(), limit }),
    help: 'your unverified facts and their fact-check state (default: pending)',
    writes: false,
  }),
  'facts.resolve': def({
    args: z.strictObject({ fact_id: id, status: z.enum(['verified', 'rejected']), evidence: text(2000) }),
    help: "record a fact-check's outcome (verified|rejected) with the evidence; closes its fact-check task",
    writes: true,
  }),

  'notes.list': def({
    args: z.strictObject({
      direction: z.enum(['in', 'out']).optional(),
      unread: z.boolean().optional(),
      source: z.enum(noteSourceValues).optional(),
      limit,
    }),
    help: 'notes (default: incoming), highest priority first',
    writes: false,
  }),
  'notes.read': def({ args: z.strictObject({ id }), help: 'one note in full', writes: false }),
  'notes.send': def({
    args: z.strictObject({
      text: text(10_000),
      recipient: text(128).optional(),
      priority: z.number().int().min(0).max(10).optional(),
      tags: tagList.optional(),
    }),
    help: 'send a note (default recipient: your user; from an auxiliary loop: the main loop)',
    writes: true,
    allowedInTaskLoop: true,
  }),
  'notes.mark_read': def({
    args: z.strictObject({ ids }),
    help: 'mark incoming notes as read',
    writes: true,
    usage: '{ids: [id, …]}',
  }),

  'llm_memory.add': def({
    args: z.strictObject({
      content: text(10_000),
      title: text(200).optional(),
      tags: tagList.optional(),
      priority: priority.optional(),
      pinned: z.boolean().optional(),
    }),
    help: 'write to your notebook (context 8)',
    writes: true,
  }),
  'llm_memory.list': def({ args: listArgs, help: 'notebook entries, pinned first', writes: false }),
  'llm_memory.read': def({ args: z.strictObject({ id }), help: 'one notebook entry in full', writes: false }),
  'llm_memory.update': def({
    args: z
      .strictObject({
        id,
        content: text(10_000).optional(),
        title: text(200).optional(),
        tags: tagList.optional(),
        priority: priority.optional(),
      })
      .refine(
        atLeastOne(['content', 'title', 'tags', 'priority']),
        atLeastOneMessage(['content', 'title', 'tags', 'priority']),
      ),
    help: 'change a notebook entry',
    writes: true,
  }),
  'llm_memory.delete': def({
    args: z.strictObject({ id }),
    help: 'archive a notebook entry (restorable)',
    writes: true,
    destructive: true,
  }),
  'llm_memory.pin': def({ args: z.strictObject({ id }), help: 'pin a notebook entry', writes: true }),
  'llm_memory.unpin': def({ args: z.strictObject({ id }), help: 'unpin a notebook entry', writes: true }),

  // Forgetting is reversible: the memory manager archives the least used rows of each tier when
  // it is full (as a delete command does), and a restore brings one back.
  'memory.restore': def({
    args: z.strictObject({ kind: z.enum(restoreKinds), id }),
    help: 'bring back an archived row (forgotten by the memory manager or deleted); a link brings back its concepts',
    writes: true,
    usage: '{kind: diary|note|reply|concept|link|abstract, id}',
  }),
  'memory.search': def({
    args: z.strictObject({
      query: text(200),
      kinds: z.array(z.enum(searchKinds)).min(1).max(searchKinds.length).optional(),
      limit,
      archived: z.boolean().optional(),
    }),
    help: 'search all your memory by words and by meaning; archived: true also finds forgotten rows (restore them with memory.restore)',
    writes: false,
    usage: '{query, kinds?: [diary|note|reply|concept|abstract], limit?, archived?}',
  }),
};
