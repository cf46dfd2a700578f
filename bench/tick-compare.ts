/**
 * tick-compare: the tick before and after a change, measured in the same run. The baseline
 * (a git ref) is checked out into a temporary worktree sharing node_modules and .tools/; the
 * probe (bench/tick-probe.ts) then runs alternately in the baseline's tree and in this one,
 * `rounds` times each, every run on a fresh embedded stack. The figures are the medians over
 * the rounds, and after/before ratios (below 1 = faster now).
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
/** The probe's blocks (bench/tick-probe.ts keeps its own copy: it runs in the baseline's tree too). */
const probeSizes = { full: { blocks: 3, ticksPerBlock: 60 }, smoke: { blocks: 1, ticksPerBlock: 10 } };
const probeKeys = [
  'bare_overhead_p50_ms',
  'bare_overhead_p99_ms',
  'reflex_overhead_p50_ms',
  'reflex_overhead_p99_ms',
] as const;
type Probe = Record<(typeof probeKeys)[number], number>;

function git(args: string[], cwd = root): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** Run the probe in `tree` (`--smoke`: its smallest size); resolves with its figures. */
function probe(tree: string, label: string, smoke: boolean): Promise<Probe> {
  return new Promise((resolveProbe, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/tick-probe.ts', ...(smoke ? ['--smoke'] : [])], {
      cwd: tree,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('TICK_PROBE '));
      if (code !== 0 || !line) return reject(new Error(`${label} probe exited with ${code}: ${out.slice(-2000)}`));
      const figures = JSON.parse(line.slice('TICK_PROBE '.length)) as Probe;
      process.stdout.write(
        `  ${label.padEnd(8)} bare p50 ${figures.bare_overhead_p50_ms.toFixed(1)} ms · reflexes p50 ${figures.reflex_overhead_p50_ms.toFixed(1)} ms\n`,
      );
      resolveProbe(figures);
    });
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export async function compareTicks(
  baselineRef: string,
  rounds = 3,
  o: { smoke?: boolean } = {},
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const commit = git(['rev-parse', '--verify', `${baselineRef}^{commit}`]);
  const tree = mkdtempSync(join(tmpdir(), 'mindloop-baseline-'));
  git(['worktree', 'add', '--detach', '--force', tree, commit]);
  try {
    for (const shared of ['node_modules', '.tools']) symlinkSync(join(root, shared), join(tree, shared));
    copyFileSync(join(root, 'bench', 'tick-probe.ts'), join(tree, 'bench', 'tick-probe.ts'));
    const before: Probe[] = [];
    const after: Probe[] = [];
    for (let r = 0; r < rounds; r++) {
      process.stdout.write(`round ${r + 1}/${rounds}\n`);
      // Alternate which goes first, so a drift of the machine weighs on both alike.
      if (r % 2 === 0) {
        before.push(await probe(tree, 'before', !!o.smoke));
        after.push(await probe(root, 'after', !!o.smoke));
      } else {
        after.push(await probe(root, 'after', !!o.smoke));
        before.push(await probe(tree, 'before', !!o.smoke));
      }
    }
    const metrics: Record<string, number> = { rounds };
    for (const k of probeKeys) {
      const b = median(before.map((p) => p[k]));
      const a = median(after.map((p) => p[k]));
      const name = k.replace(/_ms$/, '');
      metrics[`before_${k}`] = b;
      metrics[`after_${k}`] = a;
      metrics[`${name}_after_before_ratio`] = a / b;
    }
    return {
      metrics,
      notes: {
        baseline: `${baselineRef} (${commit.slice(0, 12)})`,
        after: `${git(['rev-parse', '--short=12', 'HEAD'])}${git(['status', '--porcelain']) ? ' + uncommitted changes' : ''}`,
        method: `bench/tick-probe.ts in each tree, alternating, ${rounds} rounds; each: ${o.smoke ? `${probeSizes.smoke.blocks} block × ${probeSizes.smoke.ticksPerBlock}` : `${probeSizes.full.blocks} blocks × ${probeSizes.full.ticksPerBlock}`} ticks with the reflexes off and on (3 scripted validators), instant scripted model, fresh embedded stack; medians over rounds`,
        reading: '*_after_before_ratio < 1: the tick got faster; > 1: slower',
      },
    };
  } finally {
    spawnSync('git', ['worktree', 'remove', '--force', tree], { cwd: root });
    rmSync(tree, { recursive: true, force: true });
  }
}
