/**
 * Every top-level command of `mindloop` and the module that defines it. A call loads only the
 * module of the command it names, so `mindloop status demo` does not pay for the worker, the
 * MCP server, Docker or the local model; `--help`, `help` and an unknown command load them all.
 * A test keeps this table equal to what the modules register.
 */
import type { Command } from 'commander';

type Register = (program: Command) => void;

interface CommandModule {
  commands: readonly string[];
  load(): Promise<Register>;
}

export const commandModules: readonly CommandModule[] = [
  { commands: ['doctor'], load: async () => (await import('./doctor.js')).registerDoctorCommand },
  {
    commands: ['start', 'stop', 'pause', 'resume', 'agents'],
    load: async () => (await import('./agents.js')).registerAgentCommands,
  },
  { commands: ['status'], load: async () => (await import('./status.js')).registerStatusCommand },
  { commands: ['note'], load: async () => (await import('./note.js')).registerNoteCommand },
  { commands: ['replay'], load: async () => (await import('./replay.js')).registerReplayCommand },
  { commands: ['learnings', 'feedback'], load: async () => (await import('./learnings.js')).registerLearningCommands },
  {
    commands: ['escalations', 'metrics'],
    load: async () => (await import('./escalations.js')).registerEscalationCommands,
  },
  { commands: ['schedules'], load: async () => (await import('./schedules.js')).registerScheduleCommands },
  { commands: ['forks'], load: async () => (await import('./forks.js')).registerForkCommands },
  {
    commands: ['validators', 'unvalidated', 'facts', 'fact-resolve', 'memory-restore'],
    load: async () => (await import('./validators.js')).registerValidatorCommands,
  },
  { commands: ['lifeforce'], load: async () => (await import('./lifeforce.js')).registerLifeforceCommands },
  { commands: ['bus'], load: async () => (await import('./bus.js')).registerBusCommands },
  { commands: ['nerves'], load: async () => (await import('./nerves.js')).registerNerveCommands },
  { commands: ['mcp'], load: async () => (await import('./mcp.js')).registerMcpCommand },
  { commands: ['apply'], load: async () => (await import('./apply.js')).registerApplyCommand },
  { commands: ['models'], load: async () => (await import('./models.js')).registerModelCommands },
  { commands: ['tools'], load: async () => (await import('./tools.js')).registerToolCommands },
  { commands: ['memory'], load: async () => (await import('./memory.js')).registerMemoryCommands },
];

/** The modules a command line needs: the one of its command, or all of them. */
export function modulesFor(args: readonly string[]): readonly CommandModule[] {
  const name = args.find((a) => !a.startsWith('-'));
  const one = name === undefined ? undefined : commandModules.find((m) => m.commands.includes(name));
  return one ? [one] : commandModules;
}
