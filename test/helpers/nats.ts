/**
 * The bus tests run against the real NATS (with JetStream) at TEST_NATS_URL, default
 * 127.0.0.1:4222 (`npm test` starts one where it can; CI has one). Each test file works under a
 * root of its own, so runs never see each other's messages, and deletes its streams after.
 */
import { connectBus, BusUnavailableError, type Bus, type ConnectBusOptions } from '../../runtime/bus.js';
import { deleteCommandStream } from '../../runtime/bus-commands.js';

export const testNatsUrl = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

let seq = 0;
/** A root no other run uses: `mindloop_test_<pid>_<label>_<n>`. */
export function testRoot(label: string): string {
  return `mindloop_test_${process.pid}_${label}_${++seq}`;
}

/**
 * A bus under `root` whose log lines are kept in `lines`. No NATS is a failure with the fix,
 * never a skip: CI has one, and a silently skipped bus suite would hide a broken bus.
 */
export async function testBus(
  root: string,
  o: Omit<ConnectBusOptions, 'root' | 'url'> = {},
): Promise<Bus & { lines: string[] }> {
  const lines: string[] = [];
  try {
    const bus = await connectBus({
      url: testNatsUrl,
      root,
      name: `mindloop-test-${root}`,
      log: (l) => lines.push(l),
      ...o,
    });
    return Object.assign(bus, { lines });
  } catch (err) {
    if (err instanceof BusUnavailableError) {
      throw new Error(
        `the bus tests need NATS with JetStream at ${testNatsUrl} and none answers (${err.message}). ` +
          '`npm test` installs and starts one (apt-get install -y nats-server; nats-server -js -a 127.0.0.1 -p 4222); or set TEST_NATS_URL',
      );
    }
    throw err;
  }
}

/** Remove what a test created under its root (the command stream) and close; a closed bus is reopened for it. */
export async function cleanupBus(bus: Bus | undefined): Promise<void> {
  if (!bus) return;
  const open = bus.closed ? await connectBus({ url: testNatsUrl, root: bus.root, log: () => undefined }) : bus;
  await deleteCommandStream(open);
  await open.close();
}

// The bus tests' wait (every 25 ms, 10 s unless told), where they have always found it.
export { until } from './wait.js';
