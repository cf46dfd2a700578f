/** Waiting in tests: one polling loop, and the two shapes every test asks it in. */

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Poll `probe` every `pollMs` until it returns a value (anything but `undefined`), and return it.
 * A probe that throws (a query while no worker is up; a read that is not there yet) is asked again;
 * the timeout names `what` and the last error.
 */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
  pollMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      lastError = err;
    }
    await sleep(pollMs);
  }
  const why = lastError === undefined ? '' : `: ${lastError instanceof Error ? lastError.message : String(lastError)}`;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
}

/** Wait until `pred` holds. */
export async function until(
  pred: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
  pollMs = 25,
): Promise<void> {
  await waitFor(what, timeoutMs, async () => ((await pred()) ? true : undefined), pollMs);
}

/** Read until `ok(value)` holds, and return that value; the timeout shows the last value read. */
export function readUntil<T>(
  what: string,
  timeoutMs: number,
  read: () => Promise<T>,
  ok: (v: T) => boolean,
  pollMs = 100,
): Promise<T> {
  return waitFor(
    what,
    timeoutMs,
    async () => {
      const v = await read();
      if (ok(v)) return v;
      throw new Error(`last read ${JSON.stringify(v)?.slice(0, 2000)}`);
    },
    pollMs,
  );
}
