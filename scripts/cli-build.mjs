// The CLI and the worker processes as plain JavaScript, compiled once by esbuild: `cli/main.ts`
// and what it imports into `.build/cli/` (one chunk per command module, so a call still loads
// only its command's code), `workers/main.ts` (`npm run worker`) and `workers/dev.ts`
// (`npm start`) into `.build/worker/`. The packages they use are bundled in, the heavy ones stay
// in node_modules. A worker from its build polls about a second after it starts where the
// sources through tsx took two to three: its modules are one file read, not hundreds transpiled
// and resolved, and that is most of how soon a restarted worker takes back its agents.
// `bin/mindloop.mjs` and bootstrap.mjs run a build while every source it was made from is
// unchanged, and rebuild it (a second or two) when one changed, so an edit never runs stale
// code. Plain Node: it runs from bootstrap.mjs and from the bin script.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const stampName = 'inputs.json';

/**
 * What says the bundled packages changed: npm rewrites its lockfiles at every install, update or
 * removal, so their times stand for the ~1600 package files the build copies in. Checking those
 * files one by one took most of the freshness check, which every call pays.
 */
const dependencyStamps = ['package-lock.json', join('node_modules', '.package-lock.json')];

/**
 * Each source keeps its own `import.meta` (its directory, file and URL), as if it ran from where
 * it lies: code that finds files next to itself (migrations, workflow bundles, the tools dir)
 * finds them from the bundle too.
 */
const ownImportMeta = {
  name: 'own-import-meta',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes(`${join('node_modules', '')}`)) return undefined;
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes('import.meta')) return { contents: source, loader: 'ts' };
      const contents = source
        .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
        .replaceAll('import.meta.filename', JSON.stringify(args.path))
        .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href));
      return { contents, loader: 'ts' };
    });
  },
};

/**
 * The Temporal client's protobuf descriptor without the namespaces a client never uses: the
 * Cloud Ops API (`temporal.api.cloud`, served by Temporal Cloud's own endpoint, not a cluster's
 * frontend) and `coresdk` (the worker's protocol with its native core; the worker is not
 * bundled). The SDK builds a reflection object for every message and field of the descriptor
 * when the client is imported, which every command that talks to Temporal pays: without these
 * two (a quarter of the fields) that takes 40% less time. Kept whole when the file is not the
 * JSON the SDK has always generated, or when anything left refers into what was cut.
 */
const temporalProtoDescriptor = {
  name: 'temporal-proto-descriptor',
  setup(build) {
    build.onLoad({ filter: /[\\/]@temporalio[\\/]proto[\\/]protos[\\/]json-module\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      return { contents: prunedDescriptor(source, args.path) ?? source, loader: 'js' };
    });
  },
};

/** The json-module's source with the unused namespaces cut, or null to keep it whole. */
function prunedDescriptor(source, path) {
  const m = /^([\s\S]*?\.addJSON\()(\{[\s\S]*\})(\);\s*(?:\/\*\*[\s\S]*?\*\/\s*)?module\.exports = \$root;\s*)$/.exec(
    source,
  );
  if (!m) return null;
  let json;
  try {
    json = JSON.parse(m[2]);
  } catch {
    return null;
  }
  const api = json.temporal?.nested?.api?.nested;
  if (!api?.cloud || !json.coresdk) return null;
  delete api.cloud;
  delete json.coresdk;
  // Every field and method left must still find its types.
  const protobuf = createRequire(path)('protobufjs/light');
  const resolves = (f) => {
    try {
      f.resolve();
      return true;
    } catch {
      return false;
    }
  };
  const whole = (ns) =>
    ns.nestedArray.every(
      (o) => (o.fieldsArray ?? o.methodsArray ?? []).every(resolves) && (!o.nestedArray || whole(o)),
    );
  return whole(new protobuf.Root().addJSON(json)) ? `${m[1]}${JSON.stringify(json)}${m[3]}` : null;
}

/**
 * Packages loaded from node_modules as they are, not bundled: native code, WebAssembly or files
 * found next to their own module, and the heavy ones that only some commands load.
 */
const externalPackages = [
  '@electric-sql/*',
  '@temporalio/worker',
  '@temporalio/core-bridge',
  '@temporalio/testing',
  '@swc/*',
  'node-llama-cpp',
  'onnxruntime-node',
  'playwright-core',
  'esbuild',
  'tsx',
  'pg-native',
  'dockerode',
  'ssh2',
  'cpu-features',
];

/**
 * The builds: their entry points (output name → source) and what each leaves to node_modules.
 * The worker's build also leaves every Temporal package there: the worker's native core loads
 * its own copies of them, and the activity context, failures and payload converters must be
 * the one copy that the worker and the activities share.
 */
const builds = {
  cli: {
    entries: { main: 'cli/main.ts' },
    external: externalPackages,
    plugins: [ownImportMeta, temporalProtoDescriptor],
  },
  worker: {
    entries: { worker: 'workers/main.ts', dev: 'workers/dev.ts' },
    external: [...externalPackages, '@temporalio/*'],
    plugins: [ownImportMeta],
  },
};

/** Where build `name` lives. */
const buildDir = (name) => join(root, '.build', name);

/**
 * Compile `entryPoints` (output name → path) into `outdir` with the options every build here
 * shares (ESM for Node 20, code split, linked source maps) and `spec`'s externals and plugins.
 */
async function compileEntries(entryPoints, outdir, { external, plugins }) {
  const { build } = await import('esbuild');
  return build({
    entryPoints,
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external,
    // Bundled CommonJS packages call require() for Node's built-ins.
    banner: {
      js: "import { createRequire as __mlCreateRequire } from 'node:module'; const require = __mlCreateRequire(import.meta.url);",
    },
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'error',
    plugins,
  });
}

/**
 * Build `name` (`cli` or `worker`) into a directory of its own, then point its `current.json`
 * at it (written whole, then renamed): a call running meanwhile, or a second build racing this
 * one, always finds one complete build. Builds older than a minute that `current.json` no
 * longer names are removed. Resolves with its entries' paths.
 */
export async function buildEntries(name) {
  const spec = builds[name];
  const dir = buildDir(name);
  mkdirSync(dir, { recursive: true });
  const stamp = `b-${Date.now()}-${process.pid}`;
  const out = join(dir, stamp);
  const entryPoints = Object.fromEntries(Object.entries(spec.entries).map(([k, v]) => [k, join(root, v)]));
  const result = await compileEntries(entryPoints, out, spec);
  // The repository's own sources one by one; the packages through npm's lockfiles.
  const all = Object.keys(result.metafile.inputs).map((p) => relative(root, resolve(root, p)));
  const inputs = [
    ...all.filter((p) => !p.split(sep).includes('node_modules')),
    ...dependencyStamps.filter((p) => existsSync(join(root, p))),
  ];
  writeFileSync(join(out, stampName), JSON.stringify({ builtAt: Date.now(), inputs }));
  const pointer = join(dir, 'current.json');
  writeFileSync(`${pointer}.${process.pid}`, JSON.stringify({ dir: stamp }));
  renameSync(`${pointer}.${process.pid}`, pointer);
  for (const d of readdirSync(dir)) {
    if (!d.startsWith('b-') || d === stamp) continue;
    const full = join(dir, d);
    if (Date.now() - statSync(full).mtimeMs > 60_000) rmSync(full, { recursive: true, force: true });
  }
  return Object.fromEntries(Object.keys(spec.entries).map((k) => [k, join(out, `${k}.js`)]));
}

/** Entry `entry` of build `name` when that build is newer than every source it was made from (and npm's lockfiles), else null. */
export function freshEntry(name, entry) {
  const dir = buildDir(name);
  try {
    const { dir: current } = JSON.parse(readFileSync(join(dir, 'current.json'), 'utf8'));
    const stamp = JSON.parse(readFileSync(join(dir, current, stampName), 'utf8'));
    for (const p of stamp.inputs) if (statSync(join(root, p)).mtimeMs > stamp.builtAt) return null;
    return join(dir, current, `${entry}.js`);
  } catch {
    return null;
  }
}

/** Compile `entryPoints` into `outdir` as the worker's build is compiled (a benchmark's own worker processes). */
export function compileWorkerEntries(entryPoints, outdir) {
  return compileEntries(entryPoints, outdir, builds.worker);
}

/** The CLI's build (`.build/cli/`). */
export async function buildCli() {
  return { entry: (await buildEntries('cli')).main };
}

/** The CLI's entry when its build is fresh, else null. */
export function freshCliEntry() {
  return freshEntry('cli', 'main');
}
