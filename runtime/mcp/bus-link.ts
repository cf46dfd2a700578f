/**
 * The bridge's hold on the bus. The bus is optional: a bridge started while no NATS answers
 * still serves (the Mindloop tools need none), tells every bus tool why there is no bus and how
 * to get one, and keeps trying to connect in the background; once connected, the NATS client
 * rides out later outages by itself (it reconnects and keeps its subscriptions).
 */
import { deploymentRoot } from '../../core/bus/subjects.js';
import { BusUnavailableError, busInstallHint, connectBus, type Bus, type ConnectBusOptions } from '../bus.js';

/** Where the bridge gets its bus from. */
export interface BusSource {
  readonly root: string;
  /** The bus, or a BusUnavailableError saying why there is none and how to get one. */
  require(): Bus;
  /** For the heartbeat: connected or not, to which server, and the last error. */
  state(): BusState;
}

export interface BusState {
  connected: boolean;
  /** The server the connection talks to (or was given to try). */
  server: string | null;
  /** Why there is no working connection, when there is none. */
  error?: string;
}

/** Follow a connection's disconnects and reconnects (a closed connection ends the loop). */
function watchStatus(bus: Bus, onChange: (up: boolean) => void): void {
  void (async () => {
    try {
      for await (const s of bus.nc.status()) {
        if (s.type === 'disconnect') onChange(false);
        else if (s.type === 'reconnect') onChange(true);
      }
    } catch {
      // The status stream ends with the connection; nothing left to follow.
    }
  })();
}

/** A bus handed in by the caller (the caller closes it). */
export function fixedBusSource(bus: Bus): BusSource {
  let up = true;
  watchStatus(bus, (v) => (up = v));
  return {
    root: bus.root,
    require() {
      if (bus.closed) throw new BusUnavailableError(`the bus connection is closed. ${busInstallHint}`);
      return bus;
    },
    state() {
      if (bus.closed) return { connected: false, server: null, error: 'the bus connection is closed' };
      return {
        connected: up,
        server: bus.nc.getServer(),
        ...(up ? {} : { error: 'disconnected; the client is reconnecting' }),
      };
    },
  };
}

/** No bus on purpose (NATS_URL=off), or for `why`: every bus tool says so. */
export function offBusSource(root: string, reason?: string): BusSource {
  const why = reason ?? 'the bus is off (NATS_URL=off or --nats off)';
  return {
    root,
    require() {
      throw new BusUnavailableError(reason ?? `${why}. To get one: ${busInstallHint}`);
    },
    state: () => ({ connected: false, server: null, error: why }),
  };
}

interface BusLinkOptions extends Omit<ConnectBusOptions, 'root' | 'reconnectForever' | 'deployment'> {
  /** The bus root; with `deployment`, the link speaks under `<root>.<deployment>`. */
  root: string;
  deployment?: string;
  /** First wait between connection attempts while no bus answers (doubles up to `maxRetryMs`); default 1 s. */
  retryMs?: number;
  /** Default 10 s. */
  maxRetryMs?: number;
}

/** A bus the bridge connects itself, retrying until one answers; `close()` ends it. */
export class BusLink implements BusSource {
  readonly root: string;
  private bus: Bus | null = null;
  private up = false;
  private lastError: string;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  private constructor(private readonly o: BusLinkOptions) {
    this.root = o.deployment === undefined ? o.root : deploymentRoot(o.root, o.deployment);
    this.lastError = `not connected yet to ${o.url}`;
  }

  /** Try once now (so a bus that answers is there from the first tool call), then keep trying in the background. */
  static async open(o: BusLinkOptions): Promise<BusLink> {
    const link = new BusLink(o);
    await link.attempt(o.retryMs ?? 1000);
    return link;
  }

  private async attempt(wait: number): Promise<void> {
    if (this.stopped) return;
    try {
      const bus = await connectBus({ ...this.o, reconnectForever: true });
      if (this.stopped) return void (await bus.close());
      this.bus = bus;
      this.up = true;
      watchStatus(bus, (v) => (this.up = v));
      this.o.log?.(`mcp bridge: connected to the bus at ${bus.nc.getServer()} (root ${this.root})`);
    } catch (err) {
      this.lastError = (err as Error).message;
      const next = Math.min(wait * 2, this.o.maxRetryMs ?? 10_000);
      this.timer = setTimeout(() => void this.attempt(next), wait);
      this.timer.unref();
    }
  }

  require(): Bus {
    if (this.bus && !this.bus.closed) return this.bus;
    throw new BusUnavailableError(
      `no bus: ${this.lastError}. Retrying in the background. To get one: ${busInstallHint}`,
    );
  }

  state(): BusState {
    if (!this.bus || this.bus.closed) return { connected: false, server: this.o.url ?? null, error: this.lastError };
    return {
      connected: this.up,
      server: this.bus.nc.getServer(),
      ...(this.up ? {} : { error: 'disconnected; the client is reconnecting' }),
    };
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.bus?.close();
  }
}
