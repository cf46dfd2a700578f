// The CLI as plain JavaScript: `cli/main.ts` and what it imports, compiled once by esbuild into
// `.build/cli/` (one chunk per command module, so a call still loads only its command's code;
// the packages it bundles are copied in, the heavy ones stay in node_modules). `bin/mindloop.mjs`
// runs the build while every source it was made from is unchanged, and rebuilds it (about a
// second) when one changed, so an edit never runs stale code. Plain Node: it runs from
// bootstrap.mjs and from the bin script.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const cliBuildDir = join(root, '.build', 'cli');
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
 * Build into a directory of its own, then point `current.json` at it (written whole, then
 * renamed): a CLI call running meanwhile, or a second build racing this one, always finds one
 * complete build. Builds older than a minute that `current.json` no longer names are removed.
 */
export async function buildCli() {
  const { build } = await import('esbuild');
  mkdirSync(cliBuildDir, { recursive: true });
  const name = `b-${Date.now()}-${process.pid}`;
  const out = join(cliBuildDir, name);
  const result = await build({
    entryPoints: [join(root, 'cli', 'main.ts')],
    outdir: out,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: externalPackages,
    // Bundled CommonJS packages call require() for Node's built-ins.
    banner: {
      js: "import { createRequire as __mlCreateRequire } from 'node:module'; const require = __mlCreateRequire(import.meta.url);",
    },
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'error',
    plugins: [ownImportMeta, temporalProtoDescriptor],
  });
  // The repository's own sources one by one; the packages through npm's lockfiles.
  const all = Object.keys(result.metafile.inputs).map((p) => relative(root, resolve(root, p)));
  const inputs = [
    ...all.filter((p) => !p.split(sep).includes('node_modules')),
    ...dependencyStamps.filter((p) => existsSync(join(root, p))),
  ];
  writeFileSync(join(out, stampName), JSON.stringify({ builtAt: Date.now(), inputs }));
  const pointer = join(cliBuildDir, 'current.json');
  writeFileSync(`${pointer}.${process.pid}`, JSON.stringify({ dir: name }));
  renameSync(`${pointer}.${process.pid}`, pointer);
  for (const d of readdirSync(cliBuildDir)) {
    if (!d.startsWith('b-') || d === name) continue;
    const full = join(cliBuildDir, d);
    if (Date.now() - statSync(full).mtimeMs > 60_000) rmSync(full, { recursive: true, force: true });
  }
  return { entry: join(out, 'main.js'), inputs: all.length };
}

/** The entry of the current build when it is newer than every source it was made from (and npm's lockfiles), else null. */
export function freshCliEntry() {
  try {
    const { dir } = JSON.parse(readFileSync(join(cliBuildDir, 'current.json'), 'utf8'));
    const stamp = JSON.parse(readFileSync(join(cliBuildDir, dir, stampName), 'utf8'));
    for (const p of stamp.inputs) if (statSync(join(root, p)).mtimeMs > stamp.builtAt) return null;
    return join(cliBuildDir, dir, 'main.js');
  } catch {
    return null;
  }
}
