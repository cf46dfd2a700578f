/**
 * `npx mindloop <command>`: the user's entry point next to the Temporal UI. Commands are
 * added by the capability they belong to (agents, notes, escalations, forks, learnings…).
 */
import { Command, CommanderError } from 'commander';
import { loadEnvOrExit } from '../env.js';
import { registerAgentCommands } from './agents.js';
import { formatChecks, runDoctor } from './doctor.js';
import { registerReplayCommand } from './replay.js';
import { registerLearningCommands } from './learnings.js';
import { registerEscalationCommands } from './escalations.js';
import { registerScheduleCommands } from './schedules.js';
import { registerForkCommands } from './forks.js';
import { registerValidatorCommands } from './validators.js';
import { registerLifeforceCommands } from './lifeforce.js';
import { registerBusCommands } from './bus.js';
import { registerNerveCommands } from './nerves.js';
import { registerMcpCommand } from './mcp.js';

const program = new Command('mindloop')
  .description('Mindloop: durable, self-improving LLM agents on Temporal')
  .showHelpAfterError('(run `mindloop --help` for the commands)')
  .exitOverride();

program
  .command('doctor')
  .description('check Temporal, Postgres, Docker, the bus (NATS) and the local model; print what is missing and how to fix it')
  .option('--json', 'print the checks as JSON')
  .action(async (opts: { json?: boolean }) => {
    const checks = await runDoctor(loadEnvOrExit());
    process.stdout.write(opts.json ? `${JSON.stringify(checks, null, 2)}\n` : `${formatChecks(checks)}\n`);
    process.exitCode = checks.some((c) => c.status === 'fail') ? 1 : 0;
  });

registerAgentCommands(program);
registerReplayCommand(program);
registerLearningCommands(program);
registerEscalationCommands(program);
registerScheduleCommands(program);
registerForkCommands(program);
registerValidatorCommands(program);
registerLifeforceCommands(program);
registerBusCommands(program);
registerNerveCommands(program);
registerMcpCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // Commander already printed its message (unknown option, missing argument…); --help exits 0.
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  process.stderr.write(`mindloop: ${(err as Error).message}\n`);
  process.exit(1);
}
