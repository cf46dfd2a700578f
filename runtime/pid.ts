import { readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** Whether a process id is alive (signal 0 probes without touching it). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A child server left running by a start that was killed (SIGKILL, a crash) still holds our
 * ports and files. The process named in `pidFile` is ours only if its command line contains
 * `marker` (our own data path): then it is stopped (TERM, then KILL after `graceMs`). A pid
 * reused by a stranger is left alone. The pid file goes in either case.
 */
export async function reapOrphan(pidFile: string, marker: string, graceMs = 10_000): Promise<void> {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    return;
  }
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    /* gone already */
  }
  if (pid > 0 && cmdline.includes(marker)) {
    process.kill(pid, 'SIGTERM');
    for (let waited = 0; waited < graceMs && pidAlive(pid); waited += 100) await sleep(100);
    if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
  }
  rmSync(pidFile, { force: true });
}
