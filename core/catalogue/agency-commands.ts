/** The commands over what the agent does: settings and its cycle, abstracts, models and tasks, peers, identity, methods and strategies, shell and processes, escalation, tools, speech, nerves, descendants. */
import { z } from 'zod';
import { nerveNames } from '../nerves/index.js';
import { modeSettings } from '../nerves/modes.js';
import { maxSpeakChars, speechLanguageSchema } from '../speech/engine.js';
import { childNameSchema, spawnBudgetSchema, spawnGoalsSchema, spawnTypes } from '../society/spawn.js';
import { agentIdSchema } from '../ids.js';
import { stagnationClasses } from '../stagnation.js';
import {
  languageCode,
  id,
  text,
  tagList,
  limit,
  onOff,
  registryRef,
  dimension,
  methodName,
  identityFields,
  chatRoleValues,
  peerStatusValues,
  strategyActions,
  processStatusValues,
  wakeConditions,
  noteSourceValues,
  abstractSources,
  atLeastOne,
  atLeastOneMessage,
  def,
  none,
} from './args.js';
import { configKeys, configKeyNames, humanOnlyConfigKeys } from './config-keys.js';

export const agencyCommands = {
  'config.get': def({ args: z.strictObject({ key: z.enum(configKeyNames) }), help: 'one setting', writes: false }),
  'config.list': def({ args: none, help: 'all settings with their values', writes: false }),
  'config.set': def({
    args: z.strictObject({ key: z.enum(configKeyNames), value: z.unknown() }).superRefine((v, ctx) => {
      // An agent that could opt itself into running deletes unvalidated would need no injection to do it.
      if (humanOnlyConfigKeys.has(v.key))
        return void ctx.addIssue({ code: 'custom', message: `${v.key} is set by a human only`, path: ['key'] });
      const r = configKeys[v.key].schema.safeParse(v.value);
      if (!r.success)
        for (const issue of r.error.issues)
          ctx.addIssue({ code: 'custom', message: issue.message, path: ['value', ...issue.path] });
    }),
    help: 'change a setting (see config.list for keys)',
    writes: true,
    destructive: true,
    minRating: 2,
    usage: '{key, value}',
  }),

  'cycle.responses': def({
    args: z.strictObject({ n: z.number().int().min(1).max(50) }),
    help: 'show your last n replies (1..50)',
    writes: true,
  }),
  'cycle.concentration': def({
    args: z.strictObject({
      on: onOff,
      tags: tagList.optional(),
      emotions: tagList.optional(),
      op: z.enum(['and', 'or']).optional(),
    }),
    help: 'concentration mode: context filtered by tags/emotions (op and|or)',
    writes: true,
    usage: '{on: on|off, tags?, emotions?, op?: and|or}',
  }),
  'cycle.meditation': def({
    args: z.strictObject({ on: onOff }),
    help: 'meditation mode: a maximally diverse context',
    writes: true,
    usage: '{on: on|off}',
  }),
  'cycle.mode': def({
    args: z.strictObject({
      mode: z.enum(['auto', 'manual']),
      filter: z
        .strictObject({
          min_priority: z.number().int().min(0).max(10).optional(),
          tags: tagList.optional(),
          sources: z.array(z.enum(noteSourceValues)).max(10).optional(),
        })
        .optional(),
    }),
    help: 'notes mode: auto (filtered notes in full) or manual (counts and ids only)',
    writes: true,
  }),
  'cycle.pause': def({
    args: z.strictObject({ ticks: z.number().int().min(1).max(1000) }),
    help: 'skip thinking for n ticks',
    writes: true,
  }),
  'cycle.idle': def({
    args: z.strictObject({
      on: onOff,
      wake_on: z.array(z.enum(wakeConditions)).min(1).max(3).optional(),
      timeout_ms: z
        .number()
        .int()
        .min(1000)
        .max(7 * 24 * 3_600_000)
        .optional(),
    }),
    help: 'idle until a wake condition (note, process, timeout)',
    writes: true,
    usage: '{on: on|off, wake_on?: [note, process, timeout], timeout_ms?}',
  }),

  'abstracts.create': def({
    args: z.strictObject({
      title: text(300),
      summary: text(20_000),
      tags: tagList.optional(),
      sources: abstractSources,
    }),
    help: 'digest replies and entries: sources {responses, diary, concepts, links, abstracts: [ids]}',
    writes: true,
  }),
  'abstracts.extend': def({
    args: z
      .strictObject({
        id,
        summary: text(20_000).optional(),
        append: text(20_000).optional(),
        tags: tagList.optional(),
        sources: abstractSources.optional(),
      })
      .refine(
        atLeastOne(['summary', 'append', 'tags', 'sources']),
        atLeastOneMessage(['summary', 'append', 'tags', 'sources']),
      ),
    help: 'extend an abstract: new summary or appended text, more sources/tags',
    writes: true,
  }),
  'abstracts.list': def({
    args: z.strictObject({ tag: text(64).optional(), limit }),
    help: 'abstracts, newest first',
    writes: false,
  }),
  'abstracts.read': def({ args: z.strictObject({ id }), help: 'one abstract in full', writes: false }),

  'llm_task.start': def({
    args: z
      .strictObject({
        task_id: id.optional(),
        title: text(300).optional(),
        description: z.string().max(5000).optional(),
        goal_id: id.optional(),
        max_ticks: z.number().int().min(1).max(10_000).optional(),
      })
      .refine((v) => (v.task_id === undefined) !== (v.title === undefined), {
        message: 'give task_id (an existing task) or title (a new task), not both',
        path: ['task_id'],
      }),
    help: 'start an auxiliary loop on a task (task_id, or title+description for a new task)',
    writes: true,
  }),
  'llm_task.stop': def({
    args: z.strictObject({ task_id: id }),
    help: 'stop the auxiliary loop of a task',
    writes: true,
  }),
  // The command only asks: the agent loop calls the model after the command's transaction
  // (an LLM activity), and the answer arrives as a note.
  'llm_task.ask': def({
    args: z.strictObject({ question: text(8000), model: registryRef.optional() }),
    help: 'ask another model of your registry one question (model: its name or id; default: your task model, else your own); the answer comes as a note (source llm:task)',
    writes: true,
    usage: '{question, model?: registry name or id}',
  }),

  // Society: known peers, messages between agents, ratings (trust follows their history), identity.
  'agents.list': def({
    args: z.strictObject({ status: z.enum([...peerStatusValues, 'all']).optional(), limit }),
    help: 'your known peers with their relation, status and your trust in them (default: all)',
    writes: false,
  }),
  'agents.add': def({
    args: z.strictObject({
      peer: agentIdSchema,
      relation: z.enum(['peer', 'sibling']).optional(),
      note: z.string().trim().max(500).optional(),
    }),
    help: 'make another agent a known peer (it knows you back); relation peer|sibling',
    writes: true,
  }),
  'agents.remove': def({
    args: z.strictObject({ peer: agentIdSchema, block: z.boolean().optional() }),
    help: 'forget a known peer; block: true also refuses its messages (agents.add undoes it)',
    writes: true,
  }),
  'messages.send': def({
    args: z.strictObject({
      to: agentIdSchema,
      text: text(10_000),
      priority: z.number().int().min(0).max(10).optional(),
      tags: tagList.optional(),
    }),
    help: 'send a known peer a message: it arrives as a note (source peer) in its next context and wakes its loop',
    writes: true,
  }),
  'reputation.read': def({
    args: z.strictObject({ peer: agentIdSchema.optional(), dimension: dimension.optional() }),
    help: 'your ratings of peers and the trust they earned (one peer: with its rating history), and what others think of you',
    writes: false,
  }),
  'reputation.rate': def({
    args: z.strictObject({
      peer: agentIdSchema,
      score: z.number().int().min(-3).max(3),
      reason: text(500),
      dimension: dimension.optional(),
    }),
    help: 'rate a peer −3…+3 with a reason (dimension default overall); your trust in it follows the history of your ratings',
    writes: true,
  }),
  'identity.read': def({ args: none, help: 'your name, description, persona, values and languages', writes: false }),
  'identity.set': def({
    args: z
      .strictObject({
        name: text(200).optional(),
        description: z.string().trim().max(2000).optional(),
        persona: z.string().trim().max(4000).optional(),
        values: z.array(text(200)).max(20).optional(),
        languages: z.array(languageCode).max(10).optional(),
      })
      .refine(atLeastOne(identityFields), atLeastOneMessage(identityFields)),
    help: 'change your identity (context 0 shows it): name, description, persona, values, languages',
    writes: true,
    // Who the agent is steers every later tick: the validators must be surer than for a note.
    minRating: 2,
  }),

  'tags.stats': def({
    args: z.strictObject({ tag: text(64).optional(), limit }),
    help: 'how often each tag is used across your diary, concepts, notebook, notes, recent replies, goals and tasks',
    writes: false,
  }),

  'llm_registry.list': def({
    args: z.strictObject({ role: z.enum(chatRoleValues).optional() }),
    help: 'the models of your registry by role, in the order calls try them (first = the one in use)',
    writes: false,
  }),
  'llm_registry.select': def({
    args: z.strictObject({ model: registryRef, role: z.enum(chatRoleValues).optional() }),
    help: 'make a model of your registry the first choice for its role (role, when given, must be its role); from your next tick',
    writes: true,
    usage: '{model: registry name or id, role?}',
  }),

  'thinking_methods.list': def({
    args: none,
    help: 'your thinking methods (the active one is in your context)',
    writes: false,
  }),
  'thinking_methods.add': def({
    args: z.strictObject({
      name: methodName,
      prompt: text(4000),
      description: z.string().trim().max(1000).optional(),
      tags: tagList.optional(),
    }),
    help: 'add a thinking method: prompt is the instruction your context carries while it is active',
    writes: true,
  }),
  'thinking_methods.use': def({
    args: z.strictObject({ name: methodName }),
    help: 'make a thinking method active (one at a time) until thinking_methods.stop',
    writes: true,
  }),
  'thinking_methods.stop': def({ args: none, help: 'stop the active thinking method', writes: true }),

  'stagnation_strategies.list': def({
    args: z.strictObject({ class: z.enum(stagnationClasses).optional() }),
    help: 'break-loop strategies with their cost, uses and measured effect on novelty',
    writes: false,
  }),
  'stagnation_strategies.add': def({
    args: z.strictObject({
      name: methodName,
      class: z.enum(stagnationClasses),
      action: z.enum(strategyActions),
      description: z.string().trim().max(1000).optional(),
      cost: z.number().min(0).max(100).optional(),
      ticks: z.number().int().min(1).max(100).optional(),
    }),
    help: `add a break-loop strategy: class ${stagnationClasses.join('|')}, action ${strategyActions.join('|')} (ticks: for pause)`,
    writes: true,
  }),
  'stagnation_strategies.use': def({
    args: z.strictObject({ name: methodName }),
    help: 'apply a strategy now; its effect on novelty is measured two ticks later, like the automatic ones',
    writes: true,
  }),

  // Runs only in the sandbox: the command returns a loop effect and the agent loop
  // runs it as a sandboxRun activity on the sandbox queue. Dangerous: needs rating +2.
  shell: def({
    args: z.strictObject({ command: text(4000), timeout_ms: z.number().int().min(100).max(600_000).optional() }),
    help: 'run a busybox sh command in the sandbox (no network, read-only root, a scratch /work, node available); output comes in the next context',
    writes: true,
    destructive: true,
  }),

  'process.start': def({
    args: z.strictObject({ name: text(200), kind: text(64), payload: z.record(z.string(), z.unknown()).optional() }),
    help: 'register an external process (its result arrives in the process log)',
    writes: true,
  }),
  'process.list': def({
    args: z.strictObject({ all: z.boolean().optional(), limit }),
    help: 'processes (default: open ones)',
    writes: false,
  }),
  'process.stop': def({
    args: z.strictObject({ process_id: text(200) }),
    help: 'stop a process (closes it)',
    writes: true,
  }),
  'process.mark': def({
    args: z.strictObject({
      process_id: text(200),
      status: z.enum(processStatusValues),
      message: z.string().max(2000).optional(),
    }),
    help: 'set a process status ok|warning|error|timeout|offline|close',
    writes: true,
  }),
  'process.cleanup': def({
    args: none,
    help: 'close every finished process (close, error, timeout, offline)',
    writes: true,
  }),

  // Escalations: ask the oversight tier; call a discovered state-machine tool.
  escalate: def({
    args: z.strictObject({
      task: text(4000),
      category: z.enum(['statistics', 'code', 'visualization', 'state_machine_designer', 'general']),
      context: z.record(z.string(), z.unknown()).optional(),
      what_i_tried: z.string().max(4000).optional(),
    }),
    help: 'escalate a task to the oversight tier (category statistics|code|visualization|state_machine_designer|general); the answer comes as a note',
    writes: true,
  }),
  'tool.call': def({
    args: z.strictObject({ tool: text(64), action: text(64), args: z.record(z.string(), z.unknown()).optional() }),
    help: 'call an action of one of your discovered state-machine tools (discover_tools list shows them, each with its state and valid actions)',
    writes: true,
    usage: '{tool, action, args?}',
  }),

  // MCP: a tool of one of the agent's MCP servers; the call runs after the command committed,
  // once, and its result comes with the next context.
  'tools.mcp': def({
    args: z.strictObject({
      server: text(64),
      tool: text(128),
      args: z.record(z.string(), z.unknown()).optional(),
    }),
    help: "call a tool of one of your MCP servers with its input schema's args; a destructive tool waits for a human; the result comes with the next context",
    writes: true,
    usage: '{server, tool, args?}',
  }),

  'tools.generate': def({
    args: z.strictObject({
      capability: z
        .string()
        .trim()
        .regex(
          /^[a-z][a-z0-9_.-]{1,63}$/,
          'a capability like "text.word_frequencies" (lowercase letters, digits, _ . -)',
        ),
      description: text(4000),
    }),
    help: 'ask for a new tool for a capability no registered tool has: it is written, safety-checked and tested in the sandbox; a note tells you when it is ready',
    writes: true,
  }),

  // Speech: the command only asks; the agent loop starts a speech workflow (workflows/speech.ts),
  // which holds the seconds of audio on the agent's lifeforce and has the speech engine say it.
  speak: def({
    args: z.strictObject({
      text: text(maxSpeakChars),
      lang: speechLanguageSchema
        .refine((l) => l !== 'auto', 'name the language to speak, e.g. "en" or "de"')
        .optional(),
    }),
    help: 'say a text aloud (lang: en, de, …): the speech engine writes a WAV for your user; costs its seconds of audio in lifeforce; the outcome comes in a later context',
    writes: true,
  }),

  // Nerves: learned behaviours, run as the agent's child workflows on their own budget.
  'nerve.start': def({
    args: z.strictObject({
      name: z.enum(nerveNames),
      steps: z.number().int().min(1).max(100_000).default(200),
      seed: z
        .number()
        .int()
        .min(0)
        .max(2 ** 32 - 1)
        .default(1),
      mode: z.enum(modeSettings).default('auto'),
    }),
    help: 'run a nerve (a learned behaviour: collision) on its sensor stream as your child workflow agent/<id>/nerve/<name>; it moves from deliberate (you decide) to reflex (a learned table) and spends its own budget',
    writes: true,
  }),

  // Descendants: the command only asks (after checking what it can); the agent loop starts the
  // spawn workflow agent/<id>/spawn/<name>, which admits, copies, funds and starts the child.
  spawn: def({
    args: z.strictObject({
      type: z.enum(spawnTypes),
      name: childNameSchema,
      goals: spawnGoalsSchema.optional(),
      budget: spawnBudgetSchema.optional(),
    }),
    help: 'give birth to a descendant with its own loop: type clone (a copy of all you have, your learnings included), trained (your diary, concept graph and known peers) or newborn (nothing); all inherit your ethics policies; name becomes its id; goals: its first goals; budget: LF carved from yours; it becomes your peer and the outcome comes as a note',
    writes: true,
  }),
};
