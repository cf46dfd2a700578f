/**
 * `npx mindloop <command>`: the user's entry point next to the Temporal UI. Commands are
 * added by the capability they belong to (agents, notes, escalations, forks, learnings…).
 */
import { Command, CommanderError } from 'commander';
import { modulesFor } from './commands.js';

const program = new Command('mindloop')
  .description('Mindloop: durable, self-improving LLM agents on Temporal')
  .showHelpAfterError('(run `mindloop --help` for the commands)')
  // A command prints its answer; the Temporal SDK's own log lines only on asking (MINDLOOP_VERBOSE=1 too).
  .option('--verbose', "also print the Temporal SDK's log lines (at LOG_LEVEL)")
  .exitOverride();

// Only the module of the command named is loaded (cli/commands.ts): a call answers without
// loading what other commands need.
for (const register of await Promise.all(modulesFor(process.argv.slice(2)).map((m) => m.load()))) register(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // Commander already printed its message (unknown option, missing argument…); --help exits 0.
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  process.stderr.write(`mindloop: ${(err as Error).message}\n`);
  process.exit(1);
}
