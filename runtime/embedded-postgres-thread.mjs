// The embedded database's own thread: PGlite (Postgres in WASM, single-threaded) and the socket
// that serves it. In the thread that runs the worker's activities, every statement's WASM work
// would wait behind them and they behind it; here it has a core of its own. Plain JavaScript, so
// the thread starts the same under tsx, vitest and the compiled CLI.
// In:  workerData { dataDir (undefined: in memory), host, port, maxConnections }; 'stop'.
// Out: { kind: 'ready', conn } | { kind: 'failed', message, code } | { kind: 'stopped' }.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

const { dataDir, host, port, maxConnections } = workerData;
const db = await PGlite.create(dataDir);
const server = new PGLiteSocketServer({ db, host, port, maxConnections });
try {
  await server.start();
  parentPort.postMessage({ kind: 'ready', conn: server.getServerConn() });
} catch (err) {
  await db.close();
  parentPort.postMessage({
    kind: 'failed',
    message: err instanceof Error ? err.message : String(err),
    code: err?.code,
  });
  process.exit(0);
}
parentPort.on('message', async (m) => {
  if (m !== 'stop') return;
  await server.stop();
  await db.close(); // flushes to disk
  parentPort.postMessage({ kind: 'stopped' });
});
